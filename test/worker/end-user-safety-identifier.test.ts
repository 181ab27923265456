import t from 'tap';
import { createTask } from '../../src/core/task.js';
import { OpenAiImagesGenerator } from '../../src/generators/openai-generator.js';
import { newIdAt } from '../../src/ids.js';
import { safetyIdentifier } from '../../src/worker/task-worker.js';
import { FakeUpstream, pngBase64 } from '../helpers/fake-upstream.js';
import { openAiReply } from '../helpers/provider-replies.js';
import { newAccountWithTokens, openTestRuntime, testWorker } from '../helpers/worker.js';

const KEY = 'deployment-signing-secret';

t.test(
  'with an end user the provider gets a keyed hash of the account and that user, else of the account',
  async (t) => {
    const deps = await openTestRuntime(t);
    const accountId = await newAccountWithTokens(deps.store, 100);
    const now = new Date();
    const tasks = [
      { prompt: 'for end user one', endUserId: 'end-user-1' },
      { prompt: 'for end user two', endUserId: 'end-user-2' },
      { prompt: 'for the account itself', endUserId: undefined },
    ].map(({ prompt, endUserId }, i) =>
      createTask(
        { model: 'beta-v5-pro', prompt },
        {
          accountId,
          now,
          newId: () => newIdAt(new Date(now.getTime() + i)),
          ...(endUserId === undefined ? {} : { endUserId }),
        },
      ),
    );
    for (const task of tasks) await deps.store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });

    const upstream = await FakeUpstream.start(t);
    const image = await pngBase64(1024, 1024);
    upstream.replyWith(openAiReply.image(image), openAiReply.image(image), openAiReply.image(image));
    const generator = new OpenAiImagesGenerator({
      apiKey: 'k',
      baseUrl: `${upstream.url}/v1`,
      model: 'gpt-image-2',
      maxConcurrency: 1,
    });
    const worker = testWorker(t, deps, { generator, safetyIdentifierKey: KEY });
    for (let i = 0; i < tasks.length; i++) t.equal(await worker.runOnce(), true);

    const sent = new Map(
      upstream.requests.map((r) => {
        const body = JSON.parse(r.body.toString()) as { prompt: string; safety_identifier: string };
        return [body.prompt, body.safety_identifier];
      }),
    );
    const one = sent.get('for end user one');
    const two = sent.get('for end user two');
    const account = sent.get('for the account itself');
    t.equal(one, safetyIdentifier(KEY, accountId, 'end-user-1'));
    t.equal(two, safetyIdentifier(KEY, accountId, 'end-user-2'));
    t.equal(account, safetyIdentifier(KEY, accountId), "a task without an end user keeps the account's identifier");
    t.equal(new Set([one, two, account]).size, 3, 'each end user is told apart from the others and the account');
    for (const id of [one, two, account]) {
      t.match(id, /^[0-9a-f]{32}$/);
      t.notMatch(id, new RegExp(`${accountId}|end-user`), 'no id of ours reaches the provider');
    }
    for (const task of tasks) t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'COMPLETED');
  },
);

t.test('the end user is part of the hash, not appended text another pair could repeat', async (t) => {
  t.not(safetyIdentifier(KEY, 'acct', 'a:b'), safetyIdentifier(KEY, 'acct:a', 'b'));
  t.not(safetyIdentifier(KEY, 'acct', 'x'), safetyIdentifier(KEY, 'acct'));
  t.equal(safetyIdentifier(KEY, 'acct', 'x'), safetyIdentifier(KEY, 'acct', 'x'), 'stable');
  t.not(safetyIdentifier(KEY, 'acct', 'x'), safetyIdentifier('other-key', 'acct', 'x'), 'keyed');
});
