import OpenAI, { toFile } from 'openai';
import t from 'tap';
import { fileTestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { callTool, mcpClient, problemOf } from '../helpers/mcp.js';

/**
 * The native route, the OpenAI face and the MCP tool make a task through one create
 * (GenerationSubmission): the same refusals, the same Idempotency-Key rules, nothing left behind
 * by a refused create. One app for the file, listening on loopback for the SDKs; no worker, since
 * nothing here needs a task to finish.
 */
// The OpenAI face answers a task that does not finish within a second with its 504 naming it.
const ctx = fileTestApp({ OPENAI_COMPAT_WAIT_SECONDS: '1' });
let base = '';
t.before(async () => {
  await ctx().app.listen({ host: '127.0.0.1', port: 0 });
  const address = ctx().app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on a port');
  base = `http://127.0.0.1:${address.port}`;
});

const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dusk' };

async function fund(accountId: string, tokens: number) {
  await ctx().store.accounts.grantTokens({ accountId, amount: tokens, note: null, now: new Date() });
}

t.test(
  'a refused create frees its Idempotency-Key at once on every face: the retry after a grant is served',
  async (t) => {
    const { app, newAccount, store } = ctx();

    const native = await newAccount(0);
    const headers = { ...native.auth, 'idempotency-key': 'native-1' };
    const refused = await app.inject({ method: 'POST', url: '/api/v1/images/generations', headers, payload: BODY });
    t.equal(refused.json().code, 'insufficient_tokens');
    await fund(native.accountId, 25);
    const served = await app.inject({ method: 'POST', url: '/api/v1/images/generations', headers, payload: BODY });
    t.equal(served.statusCode, 202, 'the same key, once the balance allows it');
    t.notOk(served.headers['idempotent-replayed'], 'served, not replayed');

    const openai = await newAccount(0);
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: openai.key, maxRetries: 0 });
    const quota = await client.images
      .generate(BODY, { headers: { 'Idempotency-Key': 'openai-1' } })
      .catch((e: unknown) => e);
    t.match(quota, { status: 429, code: 'insufficient_quota' });
    await fund(openai.accountId, 25);
    // No worker runs: the retry is admitted and its answer is the wait's 504 naming the task.
    const admitted = await client.images
      .generate(BODY, { headers: { 'Idempotency-Key': 'openai-1' } })
      .catch((e: unknown) => e);
    t.match(admitted, { status: 504, code: 'generation_timeout' }, 'the same key made a task this time');

    const mcp = await newAccount(0);
    const tools = await mcpClient(t, base, mcp.key);
    const args = { ...BODY, idempotency_key: 'mcp-1', wait_seconds: 0 };
    t.equal(problemOf(await callTool(tools, 'generate_image', args)).code, 'insufficient_tokens');
    await fund(mcp.accountId, 25);
    const made = await callTool(tools, 'generate_image', args);
    t.notOk(made.isError, 'the same idempotency_key made a task this time');

    for (const { accountId } of [native, openai, mcp]) {
      const tasks = await store.tasks.listTasks(accountId, { limit: 10 });
      t.equal(tasks.items.length, 1, 'one task for the account');
      await assertLedgerInvariant(t, store, accountId);
    }
  },
);

t.test('a replay is answered on the face that made the task, and charges nothing again', async (t) => {
  const { app, newAccount, store } = ctx();
  const { key, auth, accountId } = await newAccount(100);
  const headers = { ...auth, 'idempotency-key': 'same-key' };
  const first = await app.inject({ method: 'POST', url: '/api/v1/images/generations', headers, payload: BODY });
  const again = await app.inject({ method: 'POST', url: '/api/v1/images/generations', headers, payload: BODY });
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal(again.body, first.body, 'the first answer, byte for byte');

  // The same key on another face is another request (its fingerprint names the face): refused, not replayed.
  const tools = await mcpClient(t, base, key);
  const reused = await callTool(tools, 'generate_image', { ...BODY, idempotency_key: 'same-key', wait_seconds: 0 });
  t.equal(problemOf(reused).code, 'idempotency_key_reused');
  t.equal((await store.tasks.listTasks(accountId, { limit: 10 })).items.length, 1, 'one task');
  t.equal((await store.accounts.getAccount(accountId))?.balance, 75, 'one charge');
});

t.test('an edit refused for its price stores none of its images', async (t) => {
  const { newAccount, storedBlobKeys, store } = ctx();
  const { key, accountId } = await newAccount(0);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
  const before = (await storedBlobKeys()).length;
  const error = await client.images
    .edit({
      model: 'alpha-pro',
      prompt: 'the same lighthouse, at night',
      image: [
        await toFile(await encodedImage('png', 64, 48), 'a.png', { type: 'image/png' }),
        await toFile(await encodedImage('jpeg', 48, 64), 'b.jpg', { type: 'image/jpeg' }),
      ],
    })
    .catch((e: unknown) => e);
  t.match(error, { status: 429, code: 'insufficient_quota' });
  t.equal((await storedBlobKeys()).length, before, 'no image of the refused edit is kept');
  t.equal((await store.tasks.listTasks(accountId, { limit: 10 })).items.length, 0, 'no task');
  await assertLedgerInvariant(t, store, accountId);
});
