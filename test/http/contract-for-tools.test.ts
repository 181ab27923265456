import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { lintWithRedocly, lintWithSpectral, type LintFinding } from '../helpers/api-linters.js';
import { fileTestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { storeUpload } from '../helpers/uploads.js';

const committed = readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8');
const document = parse(committed);
const CREATE = '/api/v1/images/generations';
const ESTIMATE = '/api/v1/images/estimates';

// One app for the file, each test with its own account. Its clock runs with real time, ahead by
// what a test skips (only ever forward, and no test reads it as an absolute time).
let skippedMs = 0;
const now = () => new Date(Date.now() + skippedMs);
const ctx = fileTestApp({}, { now });

const summary = (findings: LintFinding[]) => findings.map((f) => `${f.severity} ${f.rule} ${f.path}`).sort();

/**
 * The warnings left on purpose, each justified in docs/decisions/0013-contract-for-tools.md.
 * A new warning fails this test: fix it, or justify it there and add it here.
 */
const FREE_TEXT = [
  'Account.properties.key.properties.name',
  'LedgerEntry.properties.note',
  'Model.properties.description',
  'Problem.properties.detail',
  'Problem.properties.errors.items.properties.detail',
  'Problem.properties.errors.items.properties.pointer',
  'Problem.properties.title',
  'Task.properties.prompt',
  'Task.properties.webhook_url',
  'TaskError.properties.message',
  'WebhookAttempt.properties.error',
];
/** The OpenAI face's free strings (decision 0013, "on the OpenAI face"): its shapes document, the core refuses. */
/**
 * The business API's free strings (decision 0036): names, notes and grant references as operators
 * write them, the model ids of a key's scope (checked against the catalog when the key is made),
 * the audit log's recorded values, a created key's secret, and the CSV body of a usage report.
 */
const BUSINESS_FREE_TEXT = [
  'paths./admin/v1/accounts.get.parameters.3.schema',
  'paths./admin/v1/accounts.get.responses.200.content.application/json.schema.properties.data.items.properties.name',
  'paths./admin/v1/accounts.post.responses.201.content.application/json.schema.properties.data.properties.name',
  'paths./admin/v1/accounts/{account_id}.get.responses.200.content.application/json.schema.properties.data.properties.name',
  'paths./admin/v1/accounts/{account_id}.patch.responses.200.content.application/json.schema.properties.data.properties.name',
  'paths./admin/v1/accounts/{account_id}/grants.post.parameters.1.schema',
  'paths./admin/v1/accounts/{account_id}/grants.post.requestBody.content.application/json.schema.properties.reference',
  'paths./admin/v1/accounts/{account_id}/grants.post.responses.201.content.application/json.schema.properties.data.properties.account.properties.name',
  'paths./admin/v1/accounts/{account_id}/grants.post.responses.201.content.application/json.schema.properties.data.properties.note',
  'paths./admin/v1/accounts/{account_id}/grants.post.responses.201.content.application/json.schema.properties.data.properties.reference',
  'paths./admin/v1/accounts/{account_id}/keys.get.responses.200.content.application/json.schema.properties.data.items.properties.models.anyOf.1.items',
  'paths./admin/v1/accounts/{account_id}/keys.get.responses.200.content.application/json.schema.properties.data.items.properties.name',
  'paths./admin/v1/accounts/{account_id}/keys.post.responses.201.content.application/json.schema.properties.data.properties.key',
  'paths./admin/v1/accounts/{account_id}/keys.post.responses.201.content.application/json.schema.properties.data.properties.models.anyOf.1.items',
  'paths./admin/v1/accounts/{account_id}/keys.post.responses.201.content.application/json.schema.properties.data.properties.name',
  'paths./admin/v1/audit-log.get.responses.200.content.application/json.schema.properties.data.items.properties.action',
  'paths./admin/v1/audit-log.get.responses.200.content.application/json.schema.properties.data.items.properties.admin_key_id',
  'paths./admin/v1/audit-log.get.responses.200.content.application/json.schema.properties.data.items.properties.client_address',
  'paths./admin/v1/audit-log.get.responses.200.content.application/json.schema.properties.data.items.properties.request_id',
  'paths./admin/v1/audit-log.get.responses.200.content.application/json.schema.properties.data.items.properties.target',
  'paths./admin/v1/usage.get.responses.200.content.application/json.schema.properties.data.items.properties.model',
  'paths./admin/v1/usage.get.responses.200.content.text/csv.schema',
  'paths./api/v1/keys.get.responses.200.content.application/json.schema.properties.data.items.properties.models.anyOf.1.items',
  'paths./api/v1/keys.get.responses.200.content.application/json.schema.properties.data.items.properties.name',
  'paths./api/v1/usage.get.responses.200.content.application/json.schema.properties.data.items.properties.model',
  'paths./api/v1/usage.get.responses.200.content.text/csv.schema',
];
const OPENAI_FACE_FREE_TEXT = [
  'components.schemas.OpenAiError.properties.error.properties.code.anyOf.0',
  'components.schemas.OpenAiError.properties.error.properties.message',
  'components.schemas.OpenAiError.properties.error.properties.param.anyOf.0',
  'components.schemas.OpenAiError.properties.error.properties.type',
  'components.schemas.OpenAiImagesResponse.properties.quality',
  'components.schemas.OpenAiImagesResponse.properties.size',
  ...['/v1/images/edits', '/v1/images/generations'].flatMap((path) => [
    ...['size'].map(
      (field) =>
        `paths.${path}.post.requestBody.content.${path.endsWith('edits') ? 'multipart/form-data' : 'application/json'}.schema.properties.${field}`,
    ),
    `paths.${path}.post.responses.200.headers.x-imagegen-task-ids.schema`,
  ]),
  'paths./v1/models.get.responses.200.content.application/json.schema.properties.data.items.properties.owned_by',
  'paths./v1/models/{model}.get.parameters.0.schema',
  'paths./v1/models/{model}.get.responses.200.content.application/json.schema.properties.owned_by',
];
const EXPECTED_SPECTRAL_WARNINGS = [
  'warning info-contact info',
  ...FREE_TEXT.map((path) => `warning owasp:api4:2023-string-restricted components.schemas.${path}`),
  ...OPENAI_FACE_FREE_TEXT.map((path) => `warning owasp:api4:2023-string-restricted ${path}`),
  ...BUSINESS_FREE_TEXT.map((path) => `warning owasp:api4:2023-string-restricted ${path}`),
  ...['/', '/healthz', '/readyz'].flatMap((path) => [
    `warning owasp:api2:2023-read-restricted paths.${path}.get.security`,
    `warning owasp:api8:2023-define-error-responses-401 paths.${path}.get.responses`,
    `warning owasp:api8:2023-define-error-responses-401 paths.${path}.get.responses`,
    `warning owasp:api8:2023-define-error-validation paths.${path}.get.responses`,
  ]),
].sort();

t.test('Redocly `recommended` finds no error; the one warning left is the justified one', async (t) => {
  const findings = await lintWithRedocly(committed);
  t.same(
    findings.filter((f) => f.severity === 'error'),
    [],
    'no errors',
  );
  t.same(summary(findings), ['warning info-license #/info']);
});

t.test(
  'Spectral `spectral:oas` + the OWASP ruleset find no error; the warnings left are the justified ones',
  async (t) => {
    const findings = await lintWithSpectral(committed);
    t.same(
      findings.filter((f) => f.severity === 'error'),
      [],
      'no errors',
    );
    t.same(summary(findings), EXPECTED_SPECTRAL_WARNINGS);
  },
);

t.test('per-route error codes: reads list no invalid_json, create’s 409 is only idempotency_in_progress', async (t) => {
  for (const [path, item] of Object.entries<any>(document.paths)) {
    if (!item.get) continue;
    t.notMatch(item.get.responses['400']?.description ?? '', /invalid_json/, `GET ${path}`);
  }
  const create = document.paths[CREATE].post.responses;
  t.equal(create['409'].description, 'Problem: `idempotency_in_progress`');
  t.match(document.paths[`${CREATE}/{task_id}/cancel`].post.responses['409'].description, /invalid_state/);
  t.match(document.paths[ESTIMATE].post.responses['422'].description, /invalid_media_reference/);
});

t.test('the create body is a discriminator with a mapping over named component schemas', async (t) => {
  const body = document.paths[CREATE].post.requestBody.content['application/json'].schema;
  t.same(body.discriminator, {
    propertyName: 'model',
    mapping: {
      'alpha-pro': '#/components/schemas/GenerationRequest_alpha_pro',
      'beta-v5-pro': '#/components/schemas/GenerationRequest_beta_v5_pro',
    },
  });
  for (const { $ref } of body.oneOf) t.ok(document.components.schemas[$ref.split('/').pop()], `${$ref} is a component`);
});

t.test('one webhooks entry per event, with its payload schema and the three signature headers', async (t) => {
  t.same(Object.keys(document.webhooks).sort(), [
    'image.generation.canceled',
    'image.generation.completed',
    'image.generation.failed',
  ]);
  for (const [event, item] of Object.entries<any>(document.webhooks)) {
    t.same(
      item.post.parameters.map((p: any) => `${p.in} ${p.name}`),
      ['header webhook-id', 'header webhook-timestamp', 'header webhook-signature'],
      event,
    );
    const schemaName = item.post.requestBody.content['application/json'].schema.$ref.split('/').pop();
    t.same(
      document.components.schemas[schemaName].properties.type.enum,
      [event],
      `${schemaName} is that event's payload`,
    );
  }
});

t.test(
  'every example of the create body succeeds as it stands, image-to-image ones once their placeholder names an upload',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount(10_000);
    const examples = Object.entries<any>(document.paths[CREATE].post.requestBody.content['application/json'].examples);
    t.ok(examples.length >= 4, 'a text-to-image and an image-to-image example per model');
    for (const [name, example] of examples) {
      let body = example.value;
      if (body.image_reference) {
        const refused = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: body });
        t.equal(refused.json().code, 'invalid_media_reference', `${name}: the placeholder is not an upload`);
        t.match(example.description, body.image_reference[0], `${name}: the description names the placeholder`);
        const upload = multipartRequest([filePart(await encodedImage('png', 32, 32))]);
        const uploaded = await app.inject({
          method: 'POST',
          url: '/api/v1/media',
          headers: { ...auth, ...upload.headers },
          payload: upload.payload,
        });
        body = { ...body, image_reference: [uploaded.json().data.media_id] };
      }
      const created = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: body });
      t.equal(created.statusCode, 202, `${name}: 202`);
    }
  },
);

async function uploadedMedia() {
  const h = ctx();
  const account = await h.newAccount(10_000);
  const upload = multipartRequest([filePart(await encodedImage('png', 32, 32))]);
  const uploaded = await h.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    headers: { ...account.auth, ...upload.headers },
    payload: upload.payload,
  });
  return { ...h, ...account, mediaId: uploaded.json().data.media_id as string };
}

t.test(
  'an uppercase spelling of a media id behaves as the lowercase one (record, content, reference, delete)',
  async (t) => {
    const { app, auth, mediaId } = await uploadedMedia();
    const upper = mediaId.toUpperCase();
    t.not(upper, mediaId);
    t.equal(
      (await app.inject({ url: `/api/v1/media/${upper}`, headers: auth })).json().data.media_id,
      mediaId,
      'record',
    );
    t.equal((await app.inject({ url: `/api/v1/media/${upper}/content`, headers: auth })).statusCode, 200, 'content');
    const estimate = await app.inject({
      method: 'POST',
      url: ESTIMATE,
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a harbour', image_reference: [upper] },
    });
    t.equal(estimate.statusCode, 200, 'estimate accepts the reference');
    const created = await app.inject({
      method: 'POST',
      url: CREATE,
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a harbour', image_reference: [upper] },
    });
    t.equal(created.statusCode, 202, 'create accepts the reference');
    t.same(created.json().data.image_reference, [mediaId], 'and stores it lowercase');
    t.equal(
      (await app.inject({ method: 'DELETE', url: `/api/v1/media/${upper}`, headers: auth })).statusCode,
      204,
      'delete',
    );
  },
);

t.test(
  'an uppercase spelling of a task id behaves as the lowercase one (read, long-poll, cancel, deliveries filter)',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount(1000);
    const created = await app.inject({
      method: 'POST',
      url: CREATE,
      headers: auth,
      payload: { model: 'beta-v5-pro', prompt: 'a harbour' },
    });
    const taskId: string = created.json().data.task_id;
    const upper = taskId.toUpperCase();
    t.equal((await app.inject({ url: `${CREATE}/${upper}`, headers: auth })).json().data.task_id, taskId, 'read');
    t.equal((await app.inject({ url: `${CREATE}/${upper}?wait=0`, headers: auth })).statusCode, 200, 'read with wait');
    const canceled = await app.inject({ method: 'POST', url: `${CREATE}/${upper}/cancel`, headers: auth });
    t.equal(canceled.json().data.status, 'CANCELED', 'cancel');
    t.equal(
      (await app.inject({ url: `/api/v1/webhooks/deliveries?task_id=${upper}`, headers: auth })).statusCode,
      200,
      'deliveries filter',
    );
  },
);

t.test(
  'estimate refuses the image references create refuses: unknown, another account’s, expired, generated',
  async (t) => {
    const h = ctx();
    const mine = await h.newAccount(10_000);
    const other = await h.newAccount(10_000);
    const own = await storeUpload(h.store, mine.accountId, now());
    const foreign = await storeUpload(h.store, other.accountId, now());
    const expiring = await storeUpload(h.store, mine.accountId, now(), 1000);
    skippedMs += 2000;
    const cases: Record<string, string> = {
      unknown: '01937f4c-9a2b-7c3d-8e4f-a0b1c2d3e4f5',
      'another account’s': foreign.id,
      expired: expiring.id,
    };
    for (const [what, bad] of Object.entries(cases)) {
      const body = { model: 'beta-v5-pro', prompt: 'a harbour', image_reference: [own.id, bad] };
      const [estimate, create] = await Promise.all(
        [ESTIMATE, CREATE].map((url) => h.app.inject({ method: 'POST', url, headers: mine.auth, payload: body })),
      );
      t.equal(estimate.statusCode, 422, `${what}: estimate 422`);
      t.same(estimate.json().errors, create.json().errors, `${what}: the same field error as create`);
      t.match(estimate.json(), {
        code: 'invalid_media_reference',
        errors: [{ pointer: '/image_reference/1', code: 'unknown_media' }],
      });
    }
    const ok = await h.app.inject({
      method: 'POST',
      url: ESTIMATE,
      headers: mine.auth,
      payload: { model: 'beta-v5-pro', prompt: 'a harbour', image_reference: [own.id] },
    });
    t.equal(ok.statusCode, 200, 'an own unexpired upload is priced');
    t.equal(
      (await h.app.inject({ url: '/api/v1/account', headers: mine.auth })).json().data.balance,
      10_000,
      'estimates charge nothing',
    );
  },
);

t.test(
  'the declared response headers are sent: request id, CORS, rate limits, Location, WWW-Authenticate',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount(1000);
    const created = await app.inject({
      method: 'POST',
      url: CREATE,
      headers: { ...auth, origin: 'https://example.test' },
      payload: { model: 'alpha-pro', prompt: 'a harbour' },
    });
    t.match(created.headers, {
      'x-request-id': /.+/,
      'access-control-allow-origin': '*',
      'ratelimit-limit': /^\d+$/,
      'ratelimit-remaining': /^\d+$/,
      'ratelimit-reset': /^\d+$/,
      location: `${CREATE}/${created.json().data.task_id}`,
    });
    // What a page may read of an answer, each name once.
    const exposed = String(created.headers['access-control-expose-headers']).split(', ');
    t.equal(new Set(exposed).size, exposed.length, `each name once: ${exposed.join(', ')}`);
    for (const name of ['Location', 'Retry-After', 'RateLimit-Reset', 'x-request-id', 'x-should-retry'])
      t.ok(exposed.includes(name), `${name} is exposed`);
    const unauthorized = await app.inject({ url: '/api/v1/account' });
    t.equal(unauthorized.headers['www-authenticate'], 'Bearer');
    t.equal(unauthorized.headers['access-control-allow-origin'], '*');
    const health = await app.inject({ url: '/healthz' });
    t.match(health.headers, { 'ratelimit-limit': '600', 'ratelimit-remaining': /^\d+$/, 'x-request-id': /.+/ });
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: CREATE,
      headers: { origin: 'https://example.test', 'access-control-request-method': 'POST' },
    });
    t.equal(preflight.statusCode, 204, 'a browser preflight is answered without a key');
    t.match(preflight.headers['access-control-allow-methods'], /POST/);
  },
);
