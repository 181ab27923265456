import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { ImageGenerator } from '../../src/generators/port.js';
import { TaskEvents } from '../../src/services/task-events.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { buildTestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { callTool, mcpClient, problemOf, type ToolResult } from '../helpers/mcp.js';
import { listenOnLoopback } from '../helpers/raw-http.js';
import { servingFileTestApp } from '../helpers/serving-file-app.js';
import { GatedGenerator, ScriptedGenerator, testWorker } from '../helpers/worker.js';
import { GenerationError } from '../../src/generators/port.js';
import { workerBackends } from '../../src/worker/build-worker.js';
import { FakeUpstream } from '../helpers/fake-upstream.js';
import { GEMINI_FAILURES } from '../helpers/provider-failures.js';

/** The test's reference-image host, which the stub resolver maps to loopback (as the SSRF tests do). */
const IMAGE_HOST = 'references.example.test';
const resolvingToLoopback: LookupAll = async (hostname) =>
  hostname === IMAGE_HOST ? [{ address: '127.0.0.1', family: 4 }] : [];

/**
 * The app the file's tests share, listening on loopback with an in-process worker on the local
 * renderer; each test has an account and an MCP client of its own.
 */
const serving = await servingFileTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' }, { webhookLookup: resolvingToLoopback });

/**
 * An account (with `tokens`) and an MCP client of it, on the file's app; or, for a test that
 * needs another generator, configuration or no worker (as it says), on an app of its own.
 */
async function setup(
  t: Test,
  options: {
    tokens?: number;
    env?: Record<string, string>;
    generator?: ImageGenerator;
    /** The worker's generators from configuration (a loopback provider) instead of one generator. */
    configuredBackends?: boolean;
    startWorker?: boolean;
  } = {},
) {
  const ownApp = options.env || options.generator || options.configuredBackends || options.startWorker === false;
  const { harness, base } = ownApp
    ? await ownServingApp(t, options)
    : { harness: serving.fileApp(), base: serving.base };
  const account = await harness.newAccount(options.tokens ?? 1000);
  const client = await mcpClient(t, base, account.key);
  /** Money: grants − debits + refunds = balance (called at the end of every test that moves it). */
  const ledgerHolds = () => assertLedgerInvariant(t, harness.store, account.accountId);
  return { ...harness, ...account, base, client, ledgerHolds };
}

/** An app of the test's own, listening on loopback, with a worker of the generator asked for unless told not to. */
async function ownServingApp(
  t: Test,
  options: {
    env?: Record<string, string>;
    generator?: ImageGenerator;
    configuredBackends?: boolean;
    startWorker?: boolean;
  },
) {
  const events = new TaskEvents();
  const harness = await buildTestApp(
    t,
    { WEBHOOK_ALLOW_PRIVATE: 'true', ...options.env },
    { events, webhookLookup: resolvingToLoopback },
  );
  const worker = testWorker(t, harness, {
    events,
    generator: options.generator,
    ...(options.configuredBackends && { backends: workerBackends(harness.config, 1) }),
  });
  if (options.startWorker !== false) worker.start();
  const port = await listenOnLoopback(harness.app);
  return { harness, base: `http://127.0.0.1:${port}` };
}

const textOf = (result: ToolResult) =>
  result.content.flatMap((item) => (item.type === 'text' ? [item.text] : [])).join('\n');

const structured = <T>(result: ToolResult) => result.structuredContent as T;

interface TaskOutcome {
  task: { task_id: string; status: string; cost: number; generated: { url: string; width: number; height: number }[] };
  preview: { width: number; height: number; size_bytes: number; content_type: string } | null;
}

t.test('initialize answers with the server info and the tools capability', async (t) => {
  const { client } = await setup(t);
  t.equal(client.getServerVersion()?.name, 'imagegen');
  t.ok(client.getServerCapabilities()?.tools, 'tools capability');
  t.match(client.getInstructions(), /generate_image/);
});

t.test('tools/list: seven tools, each with a description, and input and output schemas that compile', async (t) => {
  const { client } = await setup(t);
  const { tools } = await client.listTools();
  t.same(tools.map((tool) => tool.name).sort(), [
    'cancel_task',
    'estimate_price',
    'generate_image',
    'get_balance',
    'get_task',
    'list_models',
    'upload_reference',
  ]);
  const ajv = new Ajv({ strict: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  for (const tool of tools) {
    t.ok(
      tool.description && tool.description.length > 20 && !tool.description.includes('\n'),
      `${tool.name}: one line`,
    );
    t.equal(tool.inputSchema.type, 'object', `${tool.name}: input is an object`);
    t.equal(tool.outputSchema?.type, 'object', `${tool.name}: output is an object`);
    t.ok(ajv.validateSchema(tool.inputSchema), `${tool.name}: input schema is valid`);
    t.ok(ajv.validateSchema(tool.outputSchema as object), `${tool.name}: output schema is valid`);
    t.doesNotThrow(() => ajv.compile(tool.inputSchema), `${tool.name}: input schema compiles`);
    t.doesNotThrow(() => ajv.compile(tool.outputSchema as object), `${tool.name}: output schema compiles`);
    t.notMatch(JSON.stringify(tool), /"\$ref"/, `${tool.name}: self-contained`);
  }
  const generate = tools.find((tool) => tool.name === 'generate_image')!;
  const properties = generate.inputSchema.properties as Record<string, { enum?: string[] }>;
  t.same(properties.model.enum, ['alpha-pro', 'beta-v5-pro']);
  t.ok(properties.idempotency_key && properties.wait_seconds && properties.image_reference);
});

t.test(
  'list_models: the catalog with ratios, resolutions, pixel sizes and prices, as GET /api/v1/models',
  async (t) => {
    const { client, app, auth } = await setup(t);
    const result = await callTool(client, 'list_models');
    t.notOk(result.isError);
    const rest = (await app.inject({ url: '/api/v1/models', headers: auth })).json().data;
    t.same(structured<{ models: unknown[] }>(result).models, rest);
    const alpha = structured<{
      models: { id: string; prices: Record<string, number>; pixel_sizes: Record<string, Record<string, unknown>> }[];
    }>(result).models[0];
    t.same(alpha.prices, { '1K': 25, '2K': 25, '4K': 50 });
    t.same(alpha.pixel_sizes['16:9']['1K'], { width: 1376, height: 768 });
    t.match(textOf(result), /alpha-pro \(1K 25 tokens, 2K 25 tokens, 4K 50 tokens\)/);
  },
);

t.test('estimate_price prices a request as POST /api/v1/images/estimates does, and charges nothing', async (t) => {
  const { client, app, auth } = await setup(t);
  const body = { model: 'alpha-pro', prompt: 'a red bicycle', parameters: { aspect_ratio: '16:9', resolution: '4K' } };
  const result = await callTool(client, 'estimate_price', body);
  t.notOk(result.isError, textOf(result));
  t.match(structured(result), { model: 'alpha-pro', cost: 50, width: 5504, height: 3072 });
  const rest = await app.inject({ method: 'POST', url: '/api/v1/images/estimates', headers: auth, payload: body });
  t.same(structured(result), rest.json().data, 'the REST estimate');
  const balance = await callTool(client, 'get_balance');
  t.equal(structured<{ balance: number }>(balance).balance, 1000, 'nothing charged');
});

t.test(
  'generate_image: charged, waits, returns the task, a resource_link to the full image and a small inline preview; progress is reported',
  async (t) => {
    const { client, accountId, base, ledgerHolds } = await setup(t);
    const progress: { progress: number; message?: string }[] = [];
    const result = await callTool(
      client,
      'generate_image',
      { model: 'alpha-pro', prompt: 'a lighthouse at dusk', parameters: { aspect_ratio: '16:9', resolution: '1K' } },
      { onprogress: (p) => progress.push(p) },
    );
    t.notOk(result.isError, textOf(result));
    const outcome = structured<TaskOutcome>(result);
    t.equal(outcome.task.status, 'COMPLETED');
    t.equal(outcome.task.cost, 25);
    t.match(textOf(result), new RegExp(`Task ${outcome.task.task_id} is COMPLETED \\(cost 25 tokens\\)`));
    t.match(textOf(result), /preview/);

    const link = result.content.find((item) => item.type === 'resource_link');
    t.ok(link, 'a resource_link');
    if (link?.type !== 'resource_link') return;
    t.equal(link.uri, outcome.task.generated[0].url, 'the signed content URL');
    // Signed for PUBLIC_BASE_URL (the default port); the test's server listens elsewhere.
    const signed = new URL(link.uri);
    const full = await fetch(`${base}${signed.pathname}${signed.search}`);
    t.equal(full.status, 200, 'the link works without a key');
    t.equal(full.headers.get('content-type'), 'image/png');
    const fullBytes = Buffer.from(await full.arrayBuffer());
    const sharp = (await import('sharp')).default;
    const fullMeta = await sharp(fullBytes).metadata();
    t.same([fullMeta.width, fullMeta.height], [1376, 768], 'full size at the exact pixel size');

    const image = result.content.find((item) => item.type === 'image');
    t.ok(image, 'an inline image');
    if (image?.type !== 'image') return;
    t.equal(image.mimeType, 'image/jpeg');
    const previewBytes = Buffer.from(image.data, 'base64');
    t.ok(previewBytes.length <= 1_000_000, `preview ${previewBytes.length} bytes ≤ 1 MB`);
    const previewMeta = await sharp(previewBytes).metadata();
    t.same([previewMeta.width, previewMeta.height], [outcome.preview?.width, outcome.preview?.height]);
    t.ok(previewMeta.width! <= 1024 && previewMeta.height! <= 1024, 'downscaled');
    t.equal(outcome.preview?.size_bytes, previewBytes.length);

    t.ok(progress.length >= 1, `progress notifications received (${progress.length})`);
    t.match(progress[0].message, new RegExp(`Task ${outcome.task.task_id}: `));
    for (let i = 1; i < progress.length; i++)
      t.ok(progress[i].progress > progress[i - 1].progress, 'progress increases');
    const balance = await callTool(client, 'get_balance');
    t.same(structured(balance), { account_id: accountId, balance: 975 }, 'charged 25');
    await ledgerHolds();
  },
);

t.test(
  'generate_image in another output format: the link serves that format at the exact size, same price',
  async (t) => {
    const { client, base, ledgerHolds } = await setup(t);
    const { tools } = await client.listTools();
    const generate = tools.find((tool) => tool.name === 'generate_image')!;
    const parameters = (
      generate.inputSchema.properties as Record<string, { properties: Record<string, { enum?: string[] }> }>
    ).parameters;
    t.same(parameters.properties.output_format.enum, ['png', 'jpeg', 'webp'], 'output_format is offered');
    const result = await callTool(client, 'generate_image', {
      model: 'beta-v5-pro',
      prompt: 'a webp harbour',
      parameters: { aspect_ratio: '3:2', resolution: '1K', output_format: 'webp', output_compression: 60 },
    });
    t.notOk(result.isError, textOf(result));
    t.equal(structured<TaskOutcome>(result).task.cost, 25, 'same price');
    const link = result.content.find((item) => item.type === 'resource_link');
    if (link?.type !== 'resource_link') return t.fail('a resource_link');
    t.equal(link.mimeType, 'image/webp');
    t.match(link.name, /\.webp$/);
    const signed = new URL(link.uri);
    const bytes = Buffer.from(await (await fetch(`${base}${signed.pathname}${signed.search}`)).arrayBuffer());
    const sharp = (await import('sharp')).default;
    const meta = await sharp(bytes).metadata();
    t.same([meta.format, meta.width, meta.height], ['webp', 1264, 848]);

    const refused = await callTool(client, 'generate_image', {
      model: 'alpha-pro',
      prompt: 'a lossless harbour',
      parameters: { output_format: 'png', output_compression: 60 },
    });
    t.match(problemOf(refused), {
      code: 'invalid_request',
      errors: [{ pointer: '/parameters/output_compression', code: 'not_allowed' }],
    });
    await ledgerHolds();
  },
);

t.test('generate_image past its wait: the task id and how to follow it; get_task then waits for it', async (t) => {
  const generator = new GatedGenerator();
  const { client, ledgerHolds } = await setup(t, { generator });
  const progress: { progress: number; message?: string }[] = [];
  const running = await callTool(
    client,
    'generate_image',
    { model: 'beta-v5-pro', prompt: 'a slow sunrise', wait_seconds: 1 },
    { onprogress: (p) => progress.push(p) },
  );
  t.notOk(running.isError, textOf(running));
  const { task } = structured<TaskOutcome>(running);
  t.match(task.status, /^(CREATED|IN_PROGRESS)$/);
  t.match(textOf(running), new RegExp(`get_task \\{"task_id": "${task.task_id}"`));
  t.ok(progress.length >= 1, 'progress while waiting');

  await generator.started;
  const read = await callTool(client, 'get_task', { task_id: task.task_id });
  t.equal(structured<TaskOutcome>(read).task.status, 'IN_PROGRESS');
  const following = callTool(client, 'get_task', { task_id: task.task_id.toUpperCase(), wait_seconds: 30 });
  generator.open();
  const done = await following;
  t.equal(structured<TaskOutcome>(done).task.status, 'COMPLETED');
  t.ok(
    done.content.some((item) => item.type === 'image'),
    'a completed task comes with its preview',
  );
  await ledgerHolds();
});

t.test('cancel_task cancels a running task and refunds it', async (t) => {
  const generator = new GatedGenerator();
  const { client, ledgerHolds } = await setup(t, { generator });
  const created = await callTool(client, 'generate_image', {
    model: 'alpha-pro',
    prompt: 'never finished',
    parameters: { resolution: '4K' },
    wait_seconds: 0,
  });
  const { task } = structured<TaskOutcome>(created);
  t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 950);
  await generator.started;
  const canceled = await callTool(client, 'cancel_task', { task_id: task.task_id });
  t.notOk(canceled.isError, textOf(canceled));
  t.equal(structured<TaskOutcome>(canceled).task.status, 'CANCELED');
  t.match(textOf(canceled), /50 tokens were refunded/);
  t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 1000, 'refunded');
  const again = await callTool(client, 'cancel_task', { task_id: task.task_id });
  t.equal(problemOf(again).code, 'invalid_state', 'a second cancel is the REST 409');
  t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 1000, 'refunded once');
  await ledgerHolds();
});

t.test('a failed generation is a tool error that says the cost was refunded', async (t) => {
  const generator = new ScriptedGenerator([
    new GenerationError('content_policy', 'The prompt was refused by the provider policy.', false),
  ]);
  const { client, ledgerHolds } = await setup(t, { generator });
  const result = await callTool(client, 'generate_image', { model: 'alpha-pro', prompt: 'something refused' });
  t.ok(result.isError);
  t.equal(structured<TaskOutcome>(result).task.status, 'FAILED');
  t.match(textOf(result), /FAILED \(content_policy: .*\); its 25 tokens were refunded/);
  t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 1000);
  await ledgerHolds();
});

t.test(
  'a backend known down: generate_image is the REST 503 unavailable with a retry hint, nothing charged',
  async (t) => {
    const upstream = await FakeUpstream.start(t);
    const { client, ledgerHolds } = await setup(t, {
      env: { ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: 'gemini-test-key', GEMINI_BASE_URL: upstream.url },
      configuredBackends: true,
    });
    const badKey = GEMINI_FAILURES.find((row) => row.name.startsWith('an invalid or expired key'))!;
    upstream.replyWith(badKey.reply);
    const failed = await callTool(client, 'generate_image', { model: 'alpha-pro', prompt: 'with a revoked key' });
    t.ok(failed.isError, 'a failed task is a tool error');
    t.match(textOf(failed), /FAILED \(generator_unavailable: .*\); its 25 tokens were refunded/);

    const refused = await callTool(client, 'generate_image', {
      model: 'alpha-pro',
      prompt: 'while the backend is down',
    });
    const problem = problemOf(refused);
    t.equal(problem.code, 'unavailable');
    t.equal(problem.status, 503);
    t.ok(problem.retry_after_seconds && problem.retry_after_seconds >= 1, 'retry_after_seconds: the cool-down');
    t.match(textOf(refused), /Retry after \d+ s\./);
    t.equal(upstream.requests.length, 1, 'no provider call while it is known down');
    t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 1000, 'nothing charged');
    await ledgerHolds();
  },
);

t.test(
  'idempotency_key: a retry returns the same task and charges once; another request with the key is refused',
  async (t) => {
    const { client, ledgerHolds } = await setup(t);
    const args = { model: 'alpha-pro', prompt: 'a single charge', idempotency_key: 'agent-retry-1' };
    const first = structured<TaskOutcome>(await callTool(client, 'generate_image', args));
    const retried = await callTool(client, 'generate_image', { ...args, wait_seconds: 5 });
    const second = structured<TaskOutcome>(retried);
    t.equal(second.task.task_id, first.task.task_id, 'the same task');
    t.match(textOf(retried), /created for this idempotency_key before; nothing was charged again/);
    t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 975, 'charged once');
    const reused = await callTool(client, 'generate_image', { ...args, prompt: 'another request' });
    t.equal(problemOf(reused).code, 'idempotency_key_reused');
    t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 975);
    await ledgerHolds();
  },
);

t.test('image-to-image through upload_reference: base64, and a URL fetched through the SSRF guard', async (t) => {
  const { client, ledgerHolds } = await setup(t);
  const png = await encodedImage('png', 320, 200);
  const fromBase64 = await callTool(client, 'upload_reference', { image_base64: png.toString('base64') });
  t.notOk(fromBase64.isError, textOf(fromBase64));
  const uploaded = structured<{ media_id: string; width: number; height: number; source: string }>(fromBase64);
  t.same([uploaded.width, uploaded.height, uploaded.source], [320, 200, 'upload']);

  const jpeg = await encodedImage('jpeg', 256, 256);
  const server = createServer((request, response) => {
    if (request.url !== '/ref.jpg') return response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'image/jpeg' }).end(jpeg);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const fromUrl = await callTool(client, 'upload_reference', { url: `http://${IMAGE_HOST}:${port}/ref.jpg` });
  t.notOk(fromUrl.isError, textOf(fromUrl));
  const fetched = structured<{ media_id: string; content_type: string; width: number }>(fromUrl);
  t.same([fetched.content_type, fetched.width], ['image/jpeg', 256]);

  const missing = await callTool(client, 'upload_reference', { url: `http://${IMAGE_HOST}:${port}/nothing.png` });
  t.match(problemOf(missing), { code: 'invalid_request', errors: [{ pointer: '/url', code: 'not_fetched' }] });

  const result = await callTool(client, 'generate_image', {
    model: 'alpha-pro',
    prompt: 'the two references, merged',
    image_reference: [uploaded.media_id, fetched.media_id],
  });
  t.notOk(result.isError, textOf(result));
  const { task } = structured<TaskOutcome & { task: { image_reference: string[] } }>(result);
  t.equal(task.status, 'COMPLETED');
  t.same(task.image_reference, [uploaded.media_id, fetched.media_id]);
  await ledgerHolds();
});

t.test('upload_reference refuses a URL to a private address unless private targets are allowed', async (t) => {
  const { client } = await setup(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'false' } });
  const result = await callTool(client, 'upload_reference', { url: `https://${IMAGE_HOST}/ref.png` });
  t.match(problemOf(result), {
    code: 'invalid_request',
    errors: [{ pointer: '/url', code: 'url_resolves_to_non_public_address' }],
  });
  t.notMatch(textOf(result), /webhook/);
});

t.test('an empty balance: generate_image is the REST insufficient_tokens, nothing is created', async (t) => {
  const { client, app, auth, ledgerHolds } = await setup(t, { tokens: 0 });
  const result = await callTool(client, 'generate_image', { model: 'alpha-pro', prompt: 'no money' });
  const problem = problemOf(result);
  const rest = await app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: auth,
    payload: { model: 'alpha-pro', prompt: 'no money' },
  });
  t.equal(problem.code, 'insufficient_tokens');
  t.equal(problem.status, 402);
  t.equal(problem.detail, rest.json().detail, 'the same message as REST');
  t.match(textOf(result), /^Error insufficient_tokens: /);
  const list = await app.inject({ url: '/api/v1/images/generations', headers: auth });
  t.same(list.json().data, [], 'no task');
  t.equal(structured<{ balance: number }>(await callTool(client, 'get_balance')).balance, 0);
  await ledgerHolds();
});

t.test('bad arguments of every tool are tool errors naming the field, with the REST messages', async (t) => {
  const { client, app, auth } = await setup(t);
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['list_models', { verbose: true }, '/verbose', 'unknown_field'],
    ['get_balance', { account: 'x' }, '/account', 'unknown_field'],
    [
      'estimate_price',
      { model: 'alpha-pro', prompt: 'ok prompt', parameters: { resolution: '8K' } },
      '/parameters/resolution',
      'not_allowed',
    ],
    [
      'generate_image',
      { model: 'beta-v5-pro', prompt: 'ok prompt', parameters: { resolution: '4K' } },
      '/parameters/resolution',
      'not_allowed',
    ],
    ['generate_image', { model: 'alpha-pro', prompt: 'ok prompt', wait_seconds: 600 }, '/wait_seconds', 'out_of_range'],
    [
      'generate_image',
      { model: 'alpha-pro', prompt: 'ok prompt', idempotency_key: '' },
      '/idempotency_key',
      'too_short',
    ],
    [
      'generate_image',
      { model: 'alpha-pro', prompt: 'ok prompt', image_reference: [] },
      '/image_reference',
      'too_few_items',
    ],
    ['generate_image', { model: 'nope', prompt: 'ok prompt' }, '/model', 'not_allowed'],
    ['generate_image', { prompt: 'ok prompt' }, '/model', 'required'],
    ['get_task', { task_id: 'not-a-uuid-but-thirty-six-characters' }, '/task_id', 'invalid_format'],
    ['get_task', {}, '/task_id', 'required'],
    ['cancel_task', { task_id: 42 }, '/task_id', 'wrong_type'],
    ['upload_reference', {}, '/image_base64', 'required'],
    ['upload_reference', { image_base64: 'aGVsbG8=', url: 'https://example.com/x.png' }, '/url', 'not_allowed'],
    ['upload_reference', { image_base64: '***' }, '/image_base64', 'invalid_format'],
  ];
  for (const [tool, args, pointer, code] of cases) {
    const result = await callTool(client, tool, args);
    const problem = problemOf(result);
    t.equal(problem.code, 'invalid_request', `${tool} ${JSON.stringify(args)}: invalid_request`);
    t.match(problem.errors?.[0], { pointer, code }, `${tool}: names ${pointer}`);
    t.notMatch(textOf(result), /\n\s+at /, 'no stack trace');
  }
  // The same body refused by REST with the same words.
  const body = { model: 'beta-v5-pro', prompt: 'ok prompt', parameters: { resolution: '4K' } };
  const rest = await app.inject({ method: 'POST', url: '/api/v1/images/estimates', headers: auth, payload: body });
  const mcp = problemOf(await callTool(client, 'estimate_price', body));
  t.equal(mcp.detail, rest.json().detail);
  t.same(mcp.errors, rest.json().errors);

  const notAnImage = await callTool(client, 'upload_reference', {
    image_base64: Buffer.from('hello world').toString('base64'),
  });
  t.equal(problemOf(notAnImage).code, 'unsupported_media_type', 'the upload path refuses bytes that are no image');
  const unknownTask = await callTool(client, 'get_task', { task_id: '01937f4d-1e2f-7a3b-9c4d-e5f6a7b8c9d0' });
  t.equal(problemOf(unknownTask).code, 'not_found');
  const unknownTool = await callTool(client, 'draw', {});
  t.equal(problemOf(unknownTool).code, 'not_found');
  const foreign = await callTool(client, 'generate_image', {
    model: 'alpha-pro',
    prompt: 'foreign reference',
    image_reference: ['01937f4c-9a2b-7c3d-8e4f-a0b1c2d3e4f5'],
  });
  t.match(problemOf(foreign), { code: 'invalid_media_reference', errors: [{ pointer: '/image_reference/0' }] });
});

t.test('a wrong key, or none, is the REST 401 with WWW-Authenticate; the client cannot connect', async (t) => {
  const { base, client } = await setup(t);
  t.ok(client);
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
  };
  for (const authorization of [undefined, 'Bearer igk_wrong_key_0000000000000000000000']) {
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(authorization && { authorization }),
      },
      body: JSON.stringify(initialize),
    });
    t.equal(response.status, 401);
    // The MCP authorization spec's challenge: where the OAuth metadata is; invalid_token when one was sent.
    t.match(
      response.headers.get('www-authenticate'),
      authorization
        ? /^Bearer resource_metadata="http[^"]+\/\.well-known\/oauth-protected-resource\/mcp", error="invalid_token"$/
        : /^Bearer resource_metadata="http[^"]+\/\.well-known\/oauth-protected-resource\/mcp"$/,
    );
    t.equal((await response.json()).code, 'unauthorized');
  }
  await t.rejects(mcpClient(t, base, 'igk_wrong_key_0000000000000000000000'), 'the SDK client does not connect');
});

t.test('GET /mcp is 405 (stateless: no server stream); the answers carry the API headers', async (t) => {
  const { base, key } = await setup(t);
  const get = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } });
  t.equal(get.status, 405);
  t.equal(get.headers.get('allow'), 'POST');
  const post = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  t.equal(post.status, 200);
  t.ok(post.headers.get('x-request-id'), 'x-request-id');
  t.equal(post.headers.get('cache-control'), 'no-store');
  t.ok(post.headers.get('ratelimit-limit'), 'the per-key rate limit applies');
  t.equal(post.headers.get('mcp-session-id'), null, 'no session');
  await post.text();
});

t.test(
  'generate_image spends the per-key creates budget: beyond it a rate_limited tool error with its wait',
  async (t) => {
    // No worker: the budget is spent at admission, and tasks still rendering when the test ends
    // would write into its data directory while tap removes it.
    const { client, ledgerHolds } = await setup(t, { env: { RATE_LIMIT_CREATES_PER_MIN: '2' }, startWorker: false });
    for (const prompt of ['first create', 'second create']) {
      const created = await callTool(client, 'generate_image', { model: 'alpha-pro', prompt, wait_seconds: 0 });
      t.notOk(created.isError, textOf(created));
    }
    const refused = await callTool(client, 'generate_image', {
      model: 'alpha-pro',
      prompt: 'third create',
      wait_seconds: 0,
    });
    const problem = problemOf(refused);
    t.equal(problem.code, 'rate_limited');
    t.match(problem.detail, /may make 2 creates per minute/);
    t.ok(problem.retry_after_seconds && problem.retry_after_seconds >= 1 && problem.retry_after_seconds <= 60);
    t.equal(
      structured<{ balance: number }>(await callTool(client, 'get_balance')).balance,
      950,
      'the refused create charged nothing',
    );
    t.notOk(
      (await callTool(client, 'estimate_price', { model: 'alpha-pro', prompt: 'still priced' })).isError,
      'reads go on',
    );
    await ledgerHolds();
  },
);

t.test('MCP=false: no /mcp', async (t) => {
  const harness = await buildTestApp(t, { MCP: 'false' });
  const { auth } = await harness.newAccount();
  const response = await harness.app.inject({ method: 'POST', url: '/mcp', headers: auth, payload: {} });
  t.equal(response.statusCode, 404);
});
