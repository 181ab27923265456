import OpenAI from 'openai';
import t, { type Test } from 'tap';
import { SEED_MAX } from '../../schemas/model-entry.js';
import { callTool, mcpClient } from '../helpers/mcp.js';
import { servingFileTestApp } from '../helpers/serving-file-app.js';
import { createAndAwait } from '../helpers/task-http.js';

/**
 * Seeds (docs/design.md §3.1) on every face: the native create and estimate (`parameters.seed`),
 * the OpenAI face (`seed`, image i of n made with seed + i) through the openai SDK, and the MCP
 * generate_image tool through the MCP SDK's client. The preview renderer makes the same bytes for
 * the same prompt, parameters and seed, and another image for another seed.
 */

const { fileApp, port } = await servingFileTestApp();

const base = `http://127.0.0.1:${port}`;
const PROMPT = 'a lighthouse at dawn, watercolour';

async function account(tokens = 1000) {
  const harness = fileApp();
  return { ...harness, ...(await harness.newAccount(tokens)) };
}
type Account = Awaited<ReturnType<typeof account>>;

interface TaskBody {
  task_id: string;
  status: string;
  parameters: { seed: number | null };
  generated: { url: string }[];
}

/** A native create waited for to its end: the task and its image's bytes. */
async function made(t: Test, h: Account, parameters: Record<string, unknown>) {
  const task = (await createAndAwait(t, h, { model: 'beta-v5-pro', prompt: PROMPT, parameters })) as TaskBody;
  t.equal(task.status, 'COMPLETED');
  return { task, bytes: await bytesAt(h, task.generated[0].url) };
}

/** The bytes behind a signed content URL (signed for PUBLIC_BASE_URL, which the app listens on). */
async function bytesAt(h: Account, url: string): Promise<Buffer> {
  const { pathname, search } = new URL(url);
  const file = await h.app.inject({ url: pathname + search });
  return file.rawPayload;
}

t.test('native: the same seed makes the same bytes, another seed another image; the task keeps its seed', async (t) => {
  const h = await account();
  const parameters = { aspect_ratio: '16:9', resolution: '1K' };
  const first = await made(t, h, { ...parameters, seed: 42 });
  const again = await made(t, h, { ...parameters, seed: 42 });
  const other = await made(t, h, { ...parameters, seed: 43 });
  t.equal(first.task.parameters.seed, 42, 'returned in parameters');
  t.ok(first.bytes.equals(again.bytes), 'seed 42 twice: byte for byte');
  t.notOk(first.bytes.equals(other.bytes), 'seed 43: another image');
  const stored = await h.store.tasks.getTask(h.accountId, first.task.task_id);
  t.equal(stored?.parameters.seed, 42, 'stored on the task');
});

t.test('native: without a seed one is drawn and recorded, and it makes the same image again', async (t) => {
  const h = await account();
  const drawn = await made(t, h, {});
  const seed = drawn.task.parameters.seed;
  t.ok(Number.isInteger(seed) && seed !== null && seed >= 0 && seed <= SEED_MAX, `drawn: ${seed}`);
  const remade = await made(t, h, { seed });
  t.ok(drawn.bytes.equals(remade.bytes), 'the recorded seed makes the result again');
});

t.test('native: the estimate echoes a seed (null without one); a seed out of range is refused', async (t) => {
  const h = await account();
  const estimate = (parameters: object) =>
    h.app.inject({
      method: 'POST',
      url: '/api/v1/images/estimates',
      headers: h.auth,
      payload: { model: 'alpha-pro', prompt: PROMPT, parameters },
    });
  t.equal((await estimate({ seed: SEED_MAX })).json().data.parameters.seed, SEED_MAX);
  t.equal((await estimate({})).json().data.parameters.seed, null);
  for (const seed of [-1, SEED_MAX + 1, 1.5, '7']) {
    const refused = await estimate({ seed });
    t.equal(refused.statusCode, 400, `seed ${JSON.stringify(seed)}`);
    t.match(refused.json().errors, [{ pointer: '/parameters/seed' }]);
  }
});

t.test(
  'openai SDK: n 2 makes two images with seed and seed + 1 (wrapping); the same seed makes the same first image',
  async (t) => {
    const h = await account();
    const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: h.key });
    const ask = (n: number) =>
      openai.images
        .generate({ model: 'beta-v5-pro', prompt: PROMPT, n, seed: SEED_MAX } as OpenAI.ImageGenerateParamsNonStreaming)
        .withResponse();
    const two = await ask(2);
    const [a, b] = (two.data.data ?? []).map((image) => Buffer.from(image.b64_json ?? '', 'base64'));
    t.ok(a.length > 0 && b.length > 0);
    t.notOk(a.equals(b), 'n 2: two different images');
    const taskIds = (two.response.headers.get('x-imagegen-task-ids') ?? '').split(',');
    const seeds = await Promise.all(
      taskIds.map(async (id) => (await h.store.tasks.getTask(h.accountId, id))?.parameters.seed),
    );
    t.same(seeds, [SEED_MAX, 0], 'seed + i, wrapping past 4294967295 to 0');
    const one = await ask(1);
    t.ok(Buffer.from(one.data.data?.[0].b64_json ?? '', 'base64').equals(a), 'the same seed: the same image');
  },
);

t.test('openai SDK: a seed out of range is a BadRequestError naming param seed', async (t) => {
  const h = await account();
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: h.key });
  const error = await openai.images
    .generate({ model: 'alpha-pro', prompt: PROMPT, seed: -1 } as OpenAI.ImageGenerateParamsNonStreaming)
    .catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.BadRequestError);
  t.match(error, { param: 'seed', type: 'invalid_request_error' });
});

t.test('MCP: generate_image takes parameters.seed, returns it, and the same seed makes the same image', async (t) => {
  const h = await account();
  const client = await mcpClient(t, base, h.key);
  const generate = async (seed: number) => {
    const result = await callTool(client, 'generate_image', {
      model: 'alpha-pro',
      prompt: PROMPT,
      parameters: { seed },
    });
    t.notOk(result.isError);
    const { task } = result.structuredContent as { task: TaskBody };
    const text = result.content.flatMap((item) => (item.type === 'text' ? [item.text] : [])).join('\n');
    return { task, text, bytes: await bytesAt(h, task.generated[0].url) };
  };
  const first = await generate(7);
  const again = await generate(7);
  const other = await generate(8);
  t.equal(first.task.parameters.seed, 7);
  t.match(first.text, /seed 7: the same request with parameters\.seed 7 makes it again/, 'the text names the seed');
  t.ok(first.bytes.equals(again.bytes), 'seed 7 twice: byte for byte');
  t.notOk(first.bytes.equals(other.bytes), 'seed 8: another image');
});
