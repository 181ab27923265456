/**
 * Property-based fuzzing derived from openapi.yaml (decision 0012): for every operation, a valid request
 * is built from the document's own schemas and then mutated field by field (types, bounds,
 * encodings, nesting, duplicates, unicode) by fast-check. Whatever is sent, the answer is never a
 * 5xx, never slower than 2 s, and every error is application/problem+json with a `code` the
 * document lists and a status the operation documents.
 *
 * FUZZ_RUNS sets the total number of requests (default 5 000, spread over the operations: 5 016); a
 * failure prints fast-check's seed and path, which FUZZ_SEED replays.
 */
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { parse } from 'yaml';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { fileTestApp, type TestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { BOUNDARY, multipartBody, type FormPart } from '../helpers/multipart.js';

type Schema = Record<string, any>;
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
}

// Read as YAML 1.1, as PyYAML-based fuzzers read it: an unquoted ratio would be a number here.
const doc = parse(readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8'), { version: '1.1' });
const DOCUMENTED_CODES = new Set<string>(doc.components.schemas.Problem.properties.code.enum);
const MAX_ANSWER_MS = 2000;
const TOTAL_RUNS = Number(process.env.FUZZ_RUNS ?? 5000);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

// Webhook URLs are checked against DNS; a stub answers every name with a public address, so no
// lookup leaves the machine (and no worker runs, so nothing is ever sent).
const publicLookup: LookupAll = async () => [{ address: '93.184.216.34', family: 4 }];
// Limits high enough that 300 requests per operation test the route, not the limiter.
const FUZZ_ENV = {
  RATE_LIMIT_CREATES_PER_MIN: '1000000',
  RATE_LIMIT_REQUESTS_PER_MIN: '1000000',
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: '1000000',
  MAX_ACTIVE_TASKS: '1000000',
};

// One app for the file: each operation's test sends from accounts of its own (the limits above
// leave no budget shared between them to run out).
const ctx = fileTestApp(FUZZ_ENV, { webhookLookup: publicLookup });

const operations: { method: string; path: string; operation: Operation }[] = [];
for (const [path, item] of Object.entries<Record<string, Operation>>(doc.paths)) {
  for (const [method, operation] of Object.entries(item))
    operations.push({ method: method.toUpperCase(), path, operation });
}
const RUNS_PER_OPERATION = Math.ceil(TOTAL_RUNS / operations.length);

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  return resolve(doc.components.schemas[String(schema.$ref).split('/').pop()!]);
}

/** Ids that exist, so a valid request reaches the route's own work rather than a 404 (the task is canceled). */
interface Fixtures {
  taskId: string;
  mediaId: string;
}

/** A value the schema accepts, with optional properties chosen by the random source. */
function validValue(schema: Schema, fixtures: Fixtures, name: string): fc.Arbitrary<unknown> {
  schema = resolve(schema);
  if (schema.oneOf) return fc.oneof(...schema.oneOf.map((branch: Schema) => validValue(branch, fixtures, name)));
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const properties = Object.entries<Schema>(schema.properties ?? {});
      const required = new Set<string>(schema.required ?? []);
      const record = Object.fromEntries(properties.map(([key, child]) => [key, validValue(child, fixtures, key)]));
      return fc.record(record, { requiredKeys: properties.map(([key]) => key).filter((key) => required.has(key)) });
    }
    case 'array': {
      const item = validValue(schema.items ?? {}, fixtures, name);
      return fc.array(item, { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 3, 3) });
    }
    case 'integer':
      return fc.integer({ min: schema.minimum ?? 0, max: Math.min(schema.maximum ?? 100, 100) });
    case 'boolean':
      return fc.boolean();
    case 'string':
      return validString(schema, fixtures, name);
    default:
      return fc.constant('value');
  }
}

function validString(schema: Schema, fixtures: Fixtures, name: string): fc.Arbitrary<string> {
  if (name === 'task_id') return fc.constant(fixtures.taskId);
  if (name === 'media_id' || name === 'image_reference') return fc.constant(fixtures.mediaId);
  if (name === 'webhook_url') return fc.constant('https://hooks.example.com/imagegen');
  if (name === 'prompt') return fc.constantFrom('a lighthouse at dawn', 'zwei Möwen über dem Hafen', '夜の港');
  if (schema.format === 'date-time')
    return fc
      .date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString());
  if (schema.pattern && /0-9a-fA-F\]\{8\}/.test(schema.pattern)) return fc.constant(randomUUID());
  if (name === 'expires' || name === 'signature' || name === 'cursor')
    return fc.constant(undefined as unknown as string);
  return fc.string({
    unit: 'grapheme-ascii',
    minLength: Math.max(1, schema.minLength ?? 1),
    maxLength: Math.min(schema.maxLength ?? 20, 20),
  });
}

/** Values a field should never break the service with: wrong types, bounds, unicode, nesting, odd numbers. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.integer(),
  fc.double(),
  fc.bigInt().map((n) => Number(n)),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 4 }),
  fc.constantFrom(
    'Infinity',
    '-Infinity',
    'NaN',
    '1e309',
    '-1e309',
    '1e400',
    '-0',
    '0x10',
    '1_000',
    '１２',
    '1.5',
    ' 7',
    '7 ',
    '',
    '__proto__',
    'constructor',
    '%ff',
    '%00',
    '%2e%2e%2f',
    '../../etc/passwd',
    '\u0000',
    '\ud800',
    '\udfff',
    'ﬀ',
    '\u202e',
    'null',
    'true',
    '[]',
    '{}',
    'a'.repeat(300),
    'é'.repeat(5000),
  ),
  fc.integer({ min: 1, max: 3000 }).map((depth) => nested(depth)),
  fc.integer({ min: 1, max: 3000 }).map((depth) => nestedArray(depth)),
);

function nested(depth: number): unknown {
  let value: unknown = { __proto__: null, constructor: { prototype: 1 } };
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

function nestedArray(depth: number): unknown {
  let value: unknown = [1];
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** Query and path values are text; how a value is written into the URL is mutated too. */
const asText = (value: unknown): string => (typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));

/**
 * Percent-encoding of the UTF-8 bytes, as a client library would send them. Unlike
 * encodeURIComponent it takes any string: a lone surrogate goes out as the bytes of U+FFFD.
 */
function percentEncode(text: string): string {
  return [...Buffer.from(text, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('');
}

type Mutation =
  | { kind: 'none' }
  | { kind: 'replace'; field: number; value: unknown }
  | { kind: 'remove'; field: number }
  | { kind: 'duplicate'; field: number; value: unknown }
  | { kind: 'unknown_field'; name: string; value: unknown }
  | { kind: 'raw_encoding'; field: number; text: string }
  | { kind: 'body_text'; text: string; contentType: string | undefined };

const mutation = (fields: number): fc.Arbitrary<Mutation> => {
  const field = fc.nat(Math.max(0, fields - 1));
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant<Mutation>({ kind: 'none' }) },
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('replace' as const), field, value: hostileValue }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), field }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), field, value: hostileValue }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('unknown_field' as const),
        name: fc.constantFrom('extra', '__proto__', 'constructor', 'ä', ''),
        value: hostileValue,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('raw_encoding' as const),
        field,
        text: fc.constantFrom(
          '%ff',
          '%',
          '%zz',
          '%c0%80',
          '%e2%82',
          '%00',
          '+',
          '&',
          '=',
          '#',
          '%2F',
          '%ef%bf%bf',
          '%f0%9f%98%80',
        ),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('body_text' as const),
        text: fc.oneof(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.constantFrom(
            '',
            '{',
            '{"model":"alpha-pro","model":"beta-v5-pro","prompt":"dup keys"}',
            '\ufeff{}',
            '[]',
            'null',
            '1e309',
            '{"a":1}x',
          ),
        ),
        contentType: fc.constantFrom(
          'application/json',
          'text/plain',
          'application/json; charset=latin1',
          'application/x-www-form-urlencoded',
          undefined,
          'multipart/form-data',
        ),
      }),
    },
  );
};

interface Field {
  where: 'path' | 'query' | 'header' | 'body';
  name: string;
}

interface BuiltRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  /** A path parameter was left out or emptied: the URL names another resource (a 404 or 405 is its answer). */
  otherRoute?: boolean;
}

function buildRequest(
  method: string,
  pathTemplate: string,
  fields: Field[],
  values: Record<string, unknown>,
  body: Record<string, unknown> | undefined,
  auth: Record<string, string>,
  m: Mutation,
): BuiltRequest {
  const query: [string, string][] = [];
  const headers: Record<string, string> = { ...auth };
  const pathValues: Record<string, string> = {};
  const jsonBody = body === undefined ? undefined : { ...body };
  let rawQueryTail = '';
  let otherRoute = false;
  const put = (field: Field, value: unknown) => {
    if (field.where === 'path') pathValues[field.name] = percentEncode(asText(value));
    else if (field.where === 'query') query.push([field.name, asText(value)]);
    else if (field.where === 'header') headers[field.name] = asText(value).replace(/[^\x20-\x7e]/g, '?');
    else if (jsonBody) jsonBody[field.name] = value;
  };
  fields.forEach((field, index) => {
    const mutated = 'field' in m && m.field === index;
    if (mutated && m.kind === 'remove') return;
    if (mutated && m.kind === 'replace') {
      put(field, m.value);
      return;
    }
    if (mutated && m.kind === 'raw_encoding') {
      if (field.where === 'path') {
        pathValues[field.name] = m.text;
        // A raw '#' starts the fragment: the rest of the path is not sent.
        if (m.text.includes('#')) otherRoute = true;
      } else if (field.where === 'query') rawQueryTail += `&${field.name}=${m.text}`;
      else put(field, values[field.name]);
      return;
    }
    if (values[field.name] !== undefined) put(field, values[field.name]);
    if (mutated && m.kind === 'duplicate') put(field, m.value);
  });
  if (m.kind === 'unknown_field') {
    if (jsonBody) jsonBody[m.name] = m.value;
    else query.push([m.name, asText(m.value)]);
  }
  const path = pathTemplate.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = pathValues[name];
    // Missing, or a dot segment ('.', '..', or with %2e for a dot, as URLs read them): the URL
    // resolves to another path (…/generations/./cancel is …/generations/cancel).
    if (!value || /^(?:\.|%2e){1,2}$/i.test(value)) otherRoute = true;
    return value ?? '';
  });
  const search = query.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join('&') + rawQueryTail;
  const url = search ? `${path}?${search.replace(/^&/, '')}` : path;
  if (m.kind === 'body_text') {
    if (m.contentType) headers['content-type'] = m.contentType;
    return { method, url, headers, payload: m.text, otherRoute };
  }
  if (jsonBody === undefined) return { method, url, headers, otherRoute };
  // A duplicated body field is written twice into the JSON text, as a client could.
  let text = JSON.stringify(jsonBody);
  if (m.kind === 'duplicate' && fields[m.field]?.where === 'body') {
    text = `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}${JSON.stringify(fields[m.field].name)}:${JSON.stringify(m.value) ?? 'null'}}`;
  }
  return { method, url, headers: { ...headers, 'content-type': 'application/json' }, payload: text, otherRoute };
}

/** Upload bodies: the valid one part, or parts mutated by name, count, content and framing. */
function uploadRequest(png: Buffer, auth: Record<string, string>): fc.Arbitrary<BuiltRequest> {
  const part: fc.Arbitrary<FormPart> = fc.record({
    name: fc.oneof(fc.constant('file'), fc.constantFrom('image', 'File', '', '__proto__', 'fïle', 'file[]')),
    filename: fc.option(fc.constantFrom('a.png', '', '../../x', 'ü.png', 'a"b.png'), { nil: undefined }),
    contentType: fc.option(fc.constantFrom('image/png', 'application/json', 'text/plain', 'image/jpeg'), {
      nil: undefined,
    }),
    data: fc.oneof(
      fc.constant(png),
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
      fc.nat(png.length).map((n) => png.subarray(0, n)),
      fc.constant(Buffer.concat([png.subarray(0, 33), Buffer.alloc(200, 0xff)])),
    ),
  });
  return fc
    .record({
      parts: fc.array(part, { minLength: 0, maxLength: 3 }),
      boundary: fc.constantFrom(BOUNDARY, BOUNDARY, 'other-boundary', ''),
      close: fc.boolean(),
      contentType: fc.constantFrom('multipart/form-data', 'multipart/form-data', 'application/json', 'multipart/mixed'),
      idempotencyKey: fc.option(fc.constantFrom('k-1', '', 'é', 'x'.repeat(300)), { nil: undefined }),
    })
    .map(({ parts, boundary, close, contentType, idempotencyKey }) => ({
      method: 'POST',
      url: '/api/v1/media',
      headers: {
        ...auth,
        'content-type': boundary ? `${contentType}; boundary=${BOUNDARY}` : contentType,
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey.replace(/[^\x20-\x7e]/g, '?') }),
      },
      payload: multipartBody(parts, { boundary: boundary || BOUNDARY, close }),
    }));
}

/**
 * OpenAI edit bodies (/v1/images/edits): image parts and text fields mutated by name, count,
 * content and framing; a mask part among them.
 */
function editRequest(png: Buffer, auth: Record<string, string>): fc.Arbitrary<BuiltRequest> {
  const imagePart: fc.Arbitrary<FormPart> = fc.record({
    name: fc.constantFrom('image', 'image[]', 'mask', 'file', ''),
    filename: fc.option(fc.constantFrom('a.png', '', '../../x', 'ü.png'), { nil: undefined }),
    contentType: fc.option(fc.constantFrom('image/png', 'application/octet-stream', 'text/plain'), { nil: undefined }),
    data: fc.oneof(
      fc.constant(png),
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
      fc.nat(png.length).map((n) => png.subarray(0, n)),
    ),
  });
  const textPart: fc.Arbitrary<FormPart> = fc.record({
    name: fc.constantFrom(
      'model',
      'prompt',
      'n',
      'size',
      'quality',
      'output_format',
      'background',
      'response_format',
      'user',
      'stream',
      '__proto__',
    ),
    data: fc.oneof(
      fc.constantFrom(
        'alpha-pro',
        'beta-v5-pro',
        'a lighthouse',
        '2',
        '0',
        '11',
        'auto',
        '1024x1024',
        'transparent',
        'url',
        'true',
        '',
      ),
      fc.string({ unit: 'binary', maxLength: 60 }),
    ),
  });
  const valid: FormPart[] = [
    { name: 'model', data: 'alpha-pro' },
    { name: 'prompt', data: 'the same, at night' },
    { name: 'image', filename: 'a.png', contentType: 'image/png', data: png },
  ];
  return fc
    .record({
      parts: fc.oneof(fc.constant(valid), fc.array(fc.oneof(imagePart, textPart), { minLength: 0, maxLength: 6 })),
      extra: fc.array(fc.oneof(imagePart, textPart), { maxLength: 2 }),
      boundary: fc.constantFrom(BOUNDARY, BOUNDARY, ''),
      close: fc.boolean(),
      contentType: fc.constantFrom('multipart/form-data', 'multipart/form-data', 'application/json'),
    })
    .map(({ parts, extra, boundary, close, contentType }) => ({
      method: 'POST',
      url: '/v1/images/edits',
      headers: { ...auth, 'content-type': boundary ? `${contentType}; boundary=${BOUNDARY}` : contentType },
      payload: multipartBody([...parts, ...extra], { boundary: boundary || BOUNDARY, close }),
    }));
}

/** The OpenAI face (/v1) answers errors in OpenAI's shape: {error: {message, type, param, code}}. */
function openAiErrorProblem(body: string): string | null {
  let parsed: { error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } };
  try {
    parsed = JSON.parse(body);
  } catch {
    return 'not JSON';
  }
  const error = parsed.error;
  if (!error || typeof error.message !== 'string' || typeof error.type !== 'string') return 'no error.message/type';
  if (error.param !== null && typeof error.param !== 'string') return 'param neither string nor null';
  if (error.code !== null && typeof error.code !== 'string') return 'code neither string nor null';
  return null;
}

async function fixturesFor(h: TestApp, auth: Record<string, string>, png: Buffer): Promise<Fixtures> {
  const created = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: auth,
    payload: { model: 'alpha-pro', prompt: 'a harbour' },
  });
  const uploaded = await h.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    headers: { ...auth, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
    payload: multipartBody([{ name: 'file', filename: 'a.png', data: png }]),
  });
  if (created.statusCode !== 202 || uploaded.statusCode !== 201) throw new Error('fixtures could not be made');
  const taskId = created.json().data.task_id;
  // Terminal, so that a valid long-poll (?wait=N) answers at once instead of waiting out N seconds.
  await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: auth });
  return { taskId, mediaId: uploaded.json().data.media_id };
}

for (const { method, path, operation } of operations) {
  t.test(
    `${method} ${path}: ${RUNS_PER_OPERATION} mutated requests, no 5xx, none slower than ${MAX_ANSWER_MS} ms, every error documented`,
    async (t) => {
      const h = ctx();
      const { auth: fixtureAuth } = await h.newAccount(1_000_000_000);
      // The OpenAI face's image routes wait for their images: their requests come from an account
      // without tokens, so a valid one is answered 429 insufficient_quota at once (every field
      // check runs before the charge) instead of waiting for a worker this test does not run.
      const openAi = path.startsWith('/v1/');
      const auth = path.startsWith('/v1/images/') ? (await h.newAccount(0)).auth : fixtureAuth;
      const png = await encodedImage('png', 8, 8);
      const fixtures = await fixturesFor(h, fixtureAuth, png);
      const documented = new Set(Object.keys(operation.responses));

      const parameters = (operation.parameters ?? []).filter((p) => p.in !== 'header' || p.name !== 'authorization');
      const jsonSchema = operation.requestBody?.content['application/json']?.schema;
      const bodyFields: Field[] = [];
      if (jsonSchema) {
        const names = new Set<string>();
        for (const branch of resolve(jsonSchema).oneOf ?? [resolve(jsonSchema)])
          for (const name of Object.keys(resolve(branch).properties ?? {})) names.add(name);
        for (const name of names) bodyFields.push({ where: 'body', name });
      }
      const fields: Field[] = [...parameters.map((p) => ({ where: p.in, name: p.name }) as Field), ...bodyFields];

      const paramValues = fc.record(
        Object.fromEntries(parameters.map((p) => [p.name, validValue(p.schema, fixtures, p.name)])),
        {
          requiredKeys: parameters.filter((p) => p.required).map((p) => p.name),
        },
      );
      const multipartOperation = operation.requestBody?.content['multipart/form-data'];
      const request: fc.Arbitrary<BuiltRequest> = multipartOperation
        ? openAi
          ? editRequest(png, auth)
          : uploadRequest(png, auth)
        : fc
            .record({
              values: paramValues,
              body: jsonSchema ? validValue(jsonSchema, fixtures, '') : fc.constant(undefined),
              m: mutation(fields.length),
            })
            .map(({ values, body, m }) =>
              buildRequest(
                method,
                path,
                fields,
                values as Record<string, unknown>,
                body as Record<string, unknown> | undefined,
                auth,
                m,
              ),
            );

      let sent = 0;
      await fc.assert(
        fc.asyncProperty(request, async (req) => {
          const started = performance.now();
          const res = await h.app.inject({
            method: req.method as 'GET',
            url: req.url,
            headers: req.headers,
            payload: req.payload,
          });
          const elapsedMs = performance.now() - started;
          sent += 1;
          const where = `${req.method} ${req.url.slice(0, 200)} → ${res.statusCode} ${res.body.slice(0, 300)}`;
          if (res.statusCode >= 500) throw new Error(`5xx: ${where}`);
          if (elapsedMs > MAX_ANSWER_MS) throw new Error(`answered in ${Math.round(elapsedMs)} ms: ${where}`);
          if (res.statusCode < 400) return;
          const routingAnswer = req.otherRoute && (res.statusCode === 404 || res.statusCode === 405);
          if (openAi) {
            if (!/^application\/json/.test(String(res.headers['content-type']))) throw new Error(`not JSON: ${where}`);
            const wrong = openAiErrorProblem(res.body);
            if (wrong) throw new Error(`not an OpenAI error (${wrong}): ${where}`);
            if (!documented.has(String(res.statusCode)) && !routingAnswer)
              throw new Error(`status not documented for ${operation.operationId}: ${where}`);
            return;
          }
          if (!/^application\/problem\+json/.test(String(res.headers['content-type'])))
            throw new Error(`not problem+json: ${where}`);
          const problem = res.json();
          if (!DOCUMENTED_CODES.has(problem.code)) throw new Error(`undocumented code: ${where}`);
          if (problem.status !== res.statusCode) throw new Error(`status in body differs: ${where}`);
          if (!documented.has(String(res.statusCode)) && !routingAnswer)
            throw new Error(`status not documented for ${operation.operationId}: ${where}`);
        }),
        { numRuns: RUNS_PER_OPERATION, seed: SEED, endOnFailure: true },
      );
      t.equal(sent, RUNS_PER_OPERATION, 'every generated request was sent');
    },
  );
}

// OPTIONS is CORS's preflight (204), answered before routing.
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'QUERY', 'PROPFIND'];

t.test(
  "every path of the document answers a method it does not take with 405 and Allow, in its face's shape",
  async (t) => {
    const h = ctx();
    const { auth } = await h.newAccount(0);
    const fixtures = await fixturesFor(h, (await h.newAccount(1000)).auth, await encodedImage('png', 8, 8));
    for (const [path, item] of Object.entries<Record<string, Operation>>(doc.paths)) {
      const taken = Object.keys(item).map((method) => method.toUpperCase());
      const url = path
        .replace('{task_id}', fixtures.taskId)
        .replace('{media_id}', fixtures.mediaId)
        .replace('{model}', 'alpha-pro')
        .replace(/\{[^}]+\}/g, randomUUID());
      for (const method of METHODS.filter((m) => !taken.includes(m) && !(m === 'HEAD' && taken.includes('GET')))) {
        // Without a Content-Type: fastify refuses a QUERY for that before any route is sought.
        const res = await h.app.inject({ method: method as 'GET', url, headers: auth });
        const where = `${method} ${path} → ${res.statusCode} ${res.body.slice(0, 200)}`;
        t.equal(res.statusCode, 405, where);
        t.ok(String(res.headers.allow).split(', ').includes(taken[0]), `Allow names ${taken[0]}: ${where}`);
        if (method === 'HEAD') continue;
        if (path.startsWith('/v1/')) t.equal(openAiErrorProblem(res.body), null, `OpenAI's error shape: ${where}`);
        else t.match(res.json(), { code: 'method_not_allowed' }, where);
      }
    }
  },
);

t.test('a key without tokens: no create-like operation leaves a task, a charge or an image behind', async (t) => {
  const h = ctx();
  const { auth, accountId } = await h.newAccount(0);
  const blobsBefore = (await h.storedBlobKeys()).length;
  const png = await encodedImage('png', 8, 8);
  const body = { model: 'alpha-pro', prompt: 'a lighthouse at dusk' };
  const native = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: auth,
    payload: body,
  });
  t.equal(native.statusCode, 402);
  const generate = await h.app.inject({ method: 'POST', url: '/v1/images/generations', headers: auth, payload: body });
  t.equal(generate.statusCode, 429);
  const parts: FormPart[] = [
    { name: 'model', data: 'alpha-pro' },
    { name: 'prompt', data: 'the same lighthouse, at night' },
    { name: 'image[]', filename: 'a.png', contentType: 'image/png', data: png },
    { name: 'image[]', filename: 'b.png', contentType: 'image/png', data: png },
  ];
  const edit = await h.app.inject({
    method: 'POST',
    url: '/v1/images/edits',
    headers: { ...auth, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
    payload: multipartBody(parts),
  });
  t.equal(edit.statusCode, 429);
  t.match(edit.json(), { error: { code: 'insufficient_quota' } });
  t.equal((await h.storedBlobKeys()).length, blobsBefore, 'no image of the refused edit is kept');
  t.equal((await h.store.tasks.listTasks(accountId, { limit: 10 })).items.length, 0, 'no task');
  t.equal((await h.store.accounts.getAccount(accountId))?.balance, 0);
});
