import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { Test } from 'tap';
import { fileTestApp } from '../helpers/app.js';
import { PIXELS, SEED } from '../helpers/seed-tables.js';
import { PROBLEM_TEXT_MAX_LENGTH } from '../../schemas/resources.js';
import { invalidRequestOf, validateGenerationRequest } from '../../src/contract/validation.js';

// The create/estimate contract, table-driven from the seed values of docs/design.md §3.1 and §3.2.
// One app for the file; each test has its own account. The tables of invalid bodies are checked
// against the body schema both routes declare (GenerationRequest), compiled as the routes compile
// it; a sample of them goes through both routes to show that the routes answer what it says.
const CREATE = '/api/v1/images/generations';
const ESTIMATE = '/api/v1/images/estimates';
const PROMPT = 'a lighthouse at dawn';
const GRINNING = '😀'; // U+1F600: one code point, two UTF-16 units
const E_ACUTE_DECOMPOSED = 'e\u0301'; // one visible character, two code points

const ctx = fileTestApp();

type Answer = { statusCode: number; headers: Record<string, unknown>; body: any };

/** A new funded account; `post` sends JSON with its key. */
async function newClient(): Promise<{
  auth: { authorization: string };
  post(url: string, body: unknown): Promise<Answer>;
}> {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(1_000_000);
  return {
    auth,
    async post(url, body) {
      const res = await app.inject({ method: 'POST', url, headers: auth, payload: body as object });
      return { statusCode: res.statusCode, headers: res.headers, body: res.json() };
    },
  };
}

// The routes' body validator: the same Ajv setup, the same schemas (src/http/validation.ts).
// The validator the create and estimate routes (and the MCP tools) check a body with.
const validateRequest = validateGenerationRequest();

/** The 400 the body schema makes of `body` as it arrives in JSON, or null if the schema accepts it. */
function schemaRefusal(body: unknown) {
  const parsed = JSON.parse(JSON.stringify(body));
  return validateRequest(parsed) ? null : invalidRequestOf(validateRequest.errors ?? [], 'body');
}

/** The body schema refuses `body` with exactly one field error, at `pointer`. */
function assertSchemaRefuses(t: Test, body: unknown, pointer: string, code?: string): void {
  const refusal = schemaRefusal(body);
  t.ok(refusal, 'the body schema refuses it');
  t.equal(refusal?.code, 'invalid_request', 'code invalid_request');
  t.equal(refusal?.fieldErrors.length, 1, 'exactly one error, not one per oneOf branch');
  t.equal(refusal?.fieldErrors[0]?.pointer, pointer, `pointer ${pointer}`);
  t.equal(refusal?.fieldErrors[0]?.location, 'body', 'location body');
  if (code) t.equal(refusal?.fieldErrors[0]?.code, code, `field code ${code}`);
}

/** Asserts one 400 invalid_request problem with exactly one field error at `pointer`. */
function assertSingleFieldError(t: Test, res: Answer, pointer: string, code?: string): void {
  t.equal(res.statusCode, 400, 'status 400');
  t.match(String(res.headers['content-type']), /^application\/problem\+json/, 'problem+json');
  t.equal(res.body.code, 'invalid_request', 'code invalid_request');
  t.equal(res.body.status, 400);
  t.ok(Array.isArray(res.body.errors), 'has errors');
  t.equal(res.body.errors?.length, 1, 'exactly one error');
  t.equal(res.body.errors?.[0]?.pointer, pointer, `pointer ${pointer}`);
  t.equal(res.body.errors?.[0]?.location, 'body', 'location body');
  if (code) t.equal(res.body.errors?.[0]?.code, code, `field code ${code}`);
}

/** Both endpoints must reject the same body the same way (for what the core refuses, not the schema). */
async function assertRejectedByBoth(t: Test, body: unknown, pointer: string, code?: string): Promise<void> {
  const api = await newClient();
  for (const url of [ESTIMATE, CREATE]) {
    await t.test(url, async (t) => assertSingleFieldError(t, await api.post(url, body), pointer, code));
  }
}

/** Both endpoints must accept the body: the estimate prices it, the create returns 202. */
async function assertAcceptedByBoth(
  t: Test,
  body: Record<string, unknown>,
  given: { cost: number; parameters: { aspect_ratio: string; resolution: string } },
): Promise<void> {
  // A body without output_format asks for a PNG, which has no compression.
  // Without a seed, the estimate has none and the create draws one.
  const expected = {
    ...given,
    parameters: { output_format: 'png', output_compression: null, seed: null, ...given.parameters },
  };
  const api = await newClient();
  const estimate = await api.post(ESTIMATE, body);
  t.equal(estimate.statusCode, 200, 'estimate 200');
  const [width, height] = PIXELS[expected.parameters.aspect_ratio][expected.parameters.resolution];
  t.strictSame(estimate.body, {
    data: { model: body.model, cost: expected.cost, parameters: expected.parameters, width, height },
  });

  const created = await api.post(CREATE, body);
  t.equal(created.statusCode, 202, 'create 202');
  t.equal(created.body.data?.status, 'CREATED');
  t.equal(created.body.data?.model, body.model);
  t.equal(created.body.data?.cost, expected.cost, 'cost');
  const drawn = created.body.data?.parameters?.seed;
  t.ok(Number.isInteger(drawn), 'the create drew a seed');
  t.strictSame(created.body.data?.parameters, { ...expected.parameters, seed: drawn }, 'effective parameters');
  t.equal(created.body.data?.prompt, body.prompt, 'prompt stored as sent');
}

// ── every allowed aspect ratio × resolution, with its price ─────────────────────────────────────

for (const model of SEED) {
  for (const aspect_ratio of model.aspectRatios) {
    for (const [resolution, cost] of Object.entries(model.costs)) {
      t.test(`${model.id} accepts ${aspect_ratio} at ${resolution} for ${cost} tokens`, async (t) => {
        await assertAcceptedByBoth(
          t,
          { model: model.id, prompt: PROMPT, parameters: { aspect_ratio, resolution } },
          { cost, parameters: { aspect_ratio, resolution } },
        );
      });
    }
  }
}

// ── values a model does not offer ───────────────────────────────────────────────────────────────

for (const model of SEED) {
  for (const aspect_ratio of model.disallowedRatios) {
    t.test(`${model.id} rejects aspect_ratio ${JSON.stringify(aspect_ratio)}`, async (t) => {
      assertSchemaRefuses(
        t,
        { model: model.id, prompt: PROMPT, parameters: { aspect_ratio } },
        '/parameters/aspect_ratio',
        'not_allowed',
      );
    });
  }
  for (const resolution of model.disallowedResolutions) {
    t.test(`${model.id} rejects resolution ${JSON.stringify(resolution)}`, async (t) => {
      assertSchemaRefuses(
        t,
        { model: model.id, prompt: PROMPT, parameters: { resolution } },
        '/parameters/resolution',
        'not_allowed',
      );
    });
  }
}

t.test('beta-v5-pro rejects 4K even with an aspect ratio it offers', async (t) => {
  assertSchemaRefuses(
    t,
    { model: 'beta-v5-pro', prompt: PROMPT, parameters: { aspect_ratio: '16:9', resolution: '4K' } },
    '/parameters/resolution',
    'not_allowed',
  );
});

t.test('a ratio of the other model is refused even at a resolution both offer', async (t) => {
  assertSchemaRefuses(
    t,
    { model: 'beta-v5-pro', prompt: PROMPT, parameters: { aspect_ratio: '4:5', resolution: '1K' } },
    '/parameters/aspect_ratio',
    'not_allowed',
  );
});

// ── prompt length in Unicode code points ────────────────────────────────────────────────────────

for (const model of SEED) {
  const { min, max } = model.prompt;
  const accepted: [string, string][] = [
    [`${min} ASCII characters`, 'x'.repeat(min)],
    [`${max} ASCII characters`, 'x'.repeat(max)],
    [`${min} astral emoji (${2 * min} UTF-16 units)`, GRINNING.repeat(min)],
    [`${max} astral emoji (${2 * max} UTF-16 units)`, GRINNING.repeat(max)],
    [`${max} code points of decomposed é (${max / 2} visible characters)`, E_ACUTE_DECOMPOSED.repeat(max / 2)],
    [`one decomposed é plus one letter (${min} code points, 2 visible characters)`, `${E_ACUTE_DECOMPOSED}x`],
  ];
  const rejected: [string, string, string][] = [
    [`${min - 1} ASCII characters`, 'x'.repeat(min - 1), 'too_short'],
    [`${max + 1} ASCII characters`, 'x'.repeat(max + 1), 'too_long'],
    [`${min - 1} astral emoji (${2 * (min - 1)} UTF-16 units)`, GRINNING.repeat(min - 1), 'too_short'],
    [`${max + 1} astral emoji`, GRINNING.repeat(max + 1), 'too_long'],
    [`${max + 1} code points mixing emoji and decomposed é`, GRINNING + E_ACUTE_DECOMPOSED.repeat(max / 2), 'too_long'],
    ['one decomposed é (2 code points)', E_ACUTE_DECOMPOSED, 'too_short'],
    ['the empty string', '', 'too_short'],
  ];
  for (const [label, prompt] of accepted) {
    t.test(`${model.id} accepts a prompt of ${label}`, async (t) => {
      await assertAcceptedByBoth(
        t,
        { model: model.id, prompt },
        { cost: 25, parameters: { aspect_ratio: '1:1', resolution: '1K' } },
      );
    });
  }
  for (const [label, prompt, code] of rejected) {
    t.test(`${model.id} rejects a prompt of ${label} (${code})`, async (t) => {
      assertSchemaRefuses(t, { model: model.id, prompt }, '/prompt', code);
    });
  }
}

t.test('a prompt holding a lone surrogate is refused or stored exactly, never altered', async (t) => {
  // "ab\ud800" is valid JSON but not valid Unicode text: it has no UTF-8 form to store.
  const api = await newClient();
  const res = await ctx().app.inject({
    method: 'POST',
    url: CREATE,
    headers: { ...api.auth, 'content-type': 'application/json' },
    payload: '{"model":"alpha-pro","prompt":"ab\\ud800"}',
  });
  if (res.statusCode === 400) {
    t.equal(res.json().errors?.[0]?.pointer, '/prompt');
    return;
  }
  t.equal(res.statusCode, 202);
  t.equal(res.json().data.prompt, 'ab\ud800', 'create response echoes the prompt as sent');
  const stored = await ctx().app.inject({ method: 'GET', url: res.headers.location as string, headers: api.auth });
  t.equal(stored.json().data.prompt, res.json().data.prompt, 'GET returns the prompt the create response showed');
});

// ── image_reference count ───────────────────────────────────────────────────────────────────────

const uuids = (n: number) => Array.from({ length: n }, () => randomUUID());

for (const model of SEED) {
  const { min, max } = model.imageReference;

  t.test(`${model.id} rejects an empty image_reference (too_few_items)`, async (t) => {
    assertSchemaRefuses(
      t,
      { model: model.id, prompt: PROMPT, image_reference: [] },
      '/image_reference',
      'too_few_items',
    );
  });

  for (const count of [min, max]) {
    // No media can exist yet, so a 422 on the first reference proves the schema accepted the count.
    t.test(`${model.id} accepts ${count} image references as far as the schema goes`, async (t) => {
      const api = await newClient();
      const body = { model: model.id, prompt: PROMPT, image_reference: uuids(count) };
      const estimate = await api.post(ESTIMATE, body);
      t.not(estimate.statusCode, 400, 'the estimate schema accepts the count');
      const created = await api.post(CREATE, body);
      t.equal(created.statusCode, 422);
      t.equal(created.body.code, 'invalid_media_reference');
      t.equal(created.body.errors?.length, 1);
      t.equal(created.body.errors?.[0]?.pointer, '/image_reference/0');
    });
  }

  t.test(`${model.id} rejects ${max + 1} image references (too_many_items)`, async (t) => {
    assertSchemaRefuses(
      t,
      { model: model.id, prompt: PROMPT, image_reference: uuids(max + 1) },
      '/image_reference',
      'too_many_items',
    );
  });

  for (const [index, bad] of [
    [0, 'not-a-uuid'],
    [1, '01890a5d-ac96-774b-bcce-b302099a805'],
    [2, 42],
  ] as [number, unknown][]) {
    t.test(`${model.id} rejects a non-UUID reference ${JSON.stringify(bad)} at index ${index}`, async (t) => {
      const image_reference: unknown[] = uuids(index);
      image_reference.push(bad);
      assertSchemaRefuses(t, { model: model.id, prompt: PROMPT, image_reference }, `/image_reference/${index}`);
    });
  }
}

// ── defaults ────────────────────────────────────────────────────────────────────────────────────

for (const model of SEED) {
  const defaultCases: [
    string,
    Record<string, unknown>,
    { cost: number; parameters: { aspect_ratio: string; resolution: string } },
  ][] = [
    ['parameters omitted', {}, { cost: 25, parameters: { aspect_ratio: '1:1', resolution: '1K' } }],
    ['parameters {}', { parameters: {} }, { cost: 25, parameters: { aspect_ratio: '1:1', resolution: '1K' } }],
    [
      'only resolution 2K',
      { parameters: { resolution: '2K' } },
      { cost: model.costs['2K'], parameters: { aspect_ratio: '1:1', resolution: '2K' } },
    ],
    [
      'only aspect_ratio 16:9',
      { parameters: { aspect_ratio: '16:9' } },
      { cost: 25, parameters: { aspect_ratio: '16:9', resolution: '1K' } },
    ],
  ];
  for (const [label, extra, expected] of defaultCases) {
    t.test(`${model.id} applies defaults with ${label}`, async (t) => {
      await assertAcceptedByBoth(t, { model: model.id, prompt: PROMPT, ...extra }, expected);
    });
  }
}

// ── unknown fields, wrong types, missing fields ─────────────────────────────────────────────────

const shapeCases: [string, unknown, string, string | undefined][] = [
  ['an unknown top-level field', { model: 'alpha-pro', prompt: PROMPT, foo: 1 }, '/foo', 'unknown_field'],
  ['an unknown top-level field (beta)', { model: 'beta-v5-pro', prompt: PROMPT, seed: 7 }, '/seed', 'unknown_field'],
  [
    'a misspelt field',
    { model: 'alpha-pro', prompt: PROMPT, parameter: { resolution: '2K' } },
    '/parameter',
    'unknown_field',
  ],
  [
    'an unknown field inside parameters',
    { model: 'alpha-pro', prompt: PROMPT, parameters: { foo: 'bar' } },
    '/parameters/foo',
    'unknown_field',
  ],
  [
    'an unknown field beside valid parameters',
    { model: 'beta-v5-pro', prompt: PROMPT, parameters: { resolution: '2K', quality: 'high' } },
    '/parameters/quality',
    'unknown_field',
  ],
  ['prompt: 123 (not coerced to "123")', { model: 'alpha-pro', prompt: 123 }, '/prompt', 'wrong_type'],
  ['prompt: null', { model: 'alpha-pro', prompt: null }, '/prompt', 'wrong_type'],
  ['parameters: []', { model: 'alpha-pro', prompt: PROMPT, parameters: [] }, '/parameters', 'wrong_type'],
  ['parameters: "1:1"', { model: 'beta-v5-pro', prompt: PROMPT, parameters: '1:1' }, '/parameters', 'wrong_type'],
  [
    'image_reference as a string',
    { model: 'alpha-pro', prompt: PROMPT, image_reference: randomUUID() },
    '/image_reference',
    'wrong_type',
  ],
  [
    'resolution: 1 (a number)',
    { model: 'alpha-pro', prompt: PROMPT, parameters: { resolution: 1 } },
    '/parameters/resolution',
    undefined,
  ],
  ['model: 5', { model: 5, prompt: PROMPT }, '/model', undefined],
  ['model missing', { prompt: PROMPT }, '/model', 'required'],
  ['an unknown model', { model: 'gamma-1', prompt: PROMPT }, '/model', 'not_allowed'],
  ['a model id in the wrong case', { model: 'Alpha-Pro', prompt: PROMPT }, '/model', 'not_allowed'],
  ['prompt missing', { model: 'alpha-pro' }, '/prompt', 'required'],
  ['prompt missing (beta)', { model: 'beta-v5-pro', parameters: { resolution: '2K' } }, '/prompt', 'required'],
];

for (const [label, body, pointer, code] of shapeCases) {
  t.test(`rejects ${label}`, async (t) => {
    assertSchemaRefuses(t, body, pointer, code);
  });
}

t.test('a JSON array body is rejected, not coerced', async (t) => {
  const api = await newClient();
  for (const url of [ESTIMATE, CREATE]) {
    const res = await api.post(url, [{ model: 'alpha-pro', prompt: PROMPT }]);
    t.equal(res.statusCode, 400, url);
    t.equal(res.body.code, 'invalid_request', url);
  }
});

// ── transport-level failures ────────────────────────────────────────────────────────────────────

async function rawPost(url: string, payload: string | Buffer, contentType: string) {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  return app.inject({ method: 'POST', url, headers: { ...auth, 'content-type': contentType }, payload });
}

for (const url of [CREATE, ESTIMATE]) {
  t.test(`${url}: invalid JSON is 400 invalid_json`, async (t) => {
    const res = await rawPost(url, '{"model": "alpha-pro", "prompt": ', 'application/json');
    t.equal(res.statusCode, 400);
    t.match(res.headers['content-type'], /^application\/problem\+json/);
    t.equal(res.json().code, 'invalid_json');
  });

  t.test(
    `${url}: a "__proto__" key, or "constructor" holding "prototype", is 400 invalid_request pointing at it`,
    async (t) => {
      const cases: [string, string][] = [
        [`{"model": "alpha-pro", "prompt": "${PROMPT}", "__proto__": {"cost": 0}}`, '/__proto__'],
        [
          `{"model": "alpha-pro", "prompt": "${PROMPT}", "parameters": {"constructor": {"prototype": {"cost": 0}}}}`,
          '/parameters/constructor',
        ],
        [
          `{"model": "alpha-pro", "prompt": "${PROMPT}", "image_reference": [{"__proto__": null}]}`,
          '/image_reference/0/__proto__',
        ],
      ];
      for (const [body, pointer] of cases) {
        const res = await rawPost(url, body, 'application/json');
        t.equal(res.statusCode, 400);
        t.match(res.headers['content-type'], /^application\/problem\+json/);
        t.match(
          res.json(),
          { code: 'invalid_request', errors: [{ pointer, location: 'body', code: 'forbidden_key' }] },
          pointer,
        );
      }
    },
  );

  t.test(
    `${url}: a "__proto__" key 10 000 levels deep is found without overflowing the stack (400, not 500)`,
    async (t) => {
      const depth = 10_000;
      const body = `${'{"a":'.repeat(depth)}{"__proto__":1}${'}'.repeat(depth)}`;
      const res = await rawPost(url, body, 'application/json');
      t.equal(res.statusCode, 400);
      t.match(res.headers['content-type'], /^application\/problem\+json/);
      t.match(res.json(), { code: 'invalid_request', errors: [{ code: 'forbidden_key' }] });
      // A pointer this long is cut to the length problem texts promise (PROBLEM_TEXT_MAX_LENGTH), ending in '…'.
      const pointer: string = res.json().errors[0].pointer;
      t.ok(pointer.length <= PROBLEM_TEXT_MAX_LENGTH, 'the pointer fits the documented length');
      t.ok(
        `${'/a'.repeat(depth)}/__proto__`.startsWith(pointer.replace(/…$/, '')),
        'and is the start of the full pointer',
      );
    },
  );

  t.test(`${url}: a "constructor" key without "prototype" is an ordinary unknown field`, async (t) => {
    const res = await rawPost(
      url,
      `{"model": "alpha-pro", "prompt": "${PROMPT}", "constructor": 1}`,
      'application/json',
    );
    t.equal(res.statusCode, 400);
    t.equal(res.json().code, 'invalid_request');
    t.notMatch(res.json(), { errors: [{ code: 'forbidden_key' }] });
  });

  t.test(`${url}: an empty JSON body is 400 invalid_json`, async (t) => {
    const res = await rawPost(url, '', 'application/json');
    t.equal(res.statusCode, 400);
    t.equal(res.json().code, 'invalid_json');
  });

  t.test(`${url}: text/plain is 415 unsupported_media_type`, async (t) => {
    const res = await rawPost(url, JSON.stringify({ model: 'alpha-pro', prompt: PROMPT }), 'text/plain');
    t.equal(res.statusCode, 415);
    t.match(res.headers['content-type'], /^application\/problem\+json/);
    t.equal(res.json().code, 'unsupported_media_type');
  });

  t.test(`${url}: a body over 1 MiB is 413 payload_too_large`, async (t) => {
    const body = JSON.stringify({ model: 'alpha-pro', prompt: 'x'.repeat(1024 * 1024 + 1) });
    const res = await rawPost(url, body, 'application/json');
    t.equal(res.statusCode, 413);
    t.match(res.headers['content-type'], /^application\/problem\+json/);
    t.equal(res.json().code, 'payload_too_large');
  });
}

t.test('a rejected create debits nothing and creates nothing', async (t) => {
  const api = await newClient();
  const res = await api.post(CREATE, { model: 'beta-v5-pro', prompt: PROMPT, parameters: { resolution: '4K' } });
  t.equal(res.statusCode, 400);
  const list = await ctx().app.inject({ method: 'GET', url: CREATE, headers: api.auth });
  t.strictSame(list.json().data, []);
});

// ── output formats (decision 0024) ──────────────────────────────────────────────────────────────

for (const model of SEED) {
  const formatCases: [string, Record<string, unknown>, { output_format: string; output_compression: number | null }][] =
    [
      ['output_format png', { output_format: 'png' }, { output_format: 'png', output_compression: null }],
      [
        'output_format jpeg (default compression 80)',
        { output_format: 'jpeg' },
        { output_format: 'jpeg', output_compression: 80 },
      ],
      [
        'output_format webp (default compression 80)',
        { output_format: 'webp' },
        { output_format: 'webp', output_compression: 80 },
      ],
      [
        'webp at compression 0',
        { output_format: 'webp', output_compression: 0 },
        { output_format: 'webp', output_compression: 0 },
      ],
      [
        'jpeg at compression 100',
        { output_format: 'jpeg', output_compression: 100 },
        { output_format: 'jpeg', output_compression: 100 },
      ],
    ];
  for (const [label, extra, format] of formatCases) {
    t.test(`${model.id} accepts ${label} at the same price`, async (t) => {
      await assertAcceptedByBoth(
        t,
        { model: model.id, prompt: PROMPT, parameters: { resolution: '2K', ...extra } },
        { cost: model.costs['2K'], parameters: { aspect_ratio: '1:1', resolution: '2K', ...format } },
      );
    });
  }

  const refused: [string, Record<string, unknown>, string, string][] = [
    ['output_format "gif"', { output_format: 'gif' }, '/parameters/output_format', 'not_allowed'],
    ['output_format "PNG" (case matters)', { output_format: 'PNG' }, '/parameters/output_format', 'not_allowed'],
    ['output_format "jpg"', { output_format: 'jpg' }, '/parameters/output_format', 'not_allowed'],
    ['output_format null', { output_format: null }, '/parameters/output_format', 'wrong_type'],
    [
      'output_compression 101',
      { output_format: 'webp', output_compression: 101 },
      '/parameters/output_compression',
      'out_of_range',
    ],
    [
      'output_compression -1',
      { output_format: 'jpeg', output_compression: -1 },
      '/parameters/output_compression',
      'out_of_range',
    ],
    [
      'output_compression 50.5',
      { output_format: 'jpeg', output_compression: 50.5 },
      '/parameters/output_compression',
      'wrong_type',
    ],
    [
      'output_compression "80"',
      { output_format: 'webp', output_compression: '80' },
      '/parameters/output_compression',
      'wrong_type',
    ],
  ];
  // Refused by the core (src/core/pricing.ts), after the schema has accepted the body: through both routes.
  const refusedByCore: [string, Record<string, unknown>, string, string][] = [
    [
      'output_compression with output_format png',
      { output_format: 'png', output_compression: 80 },
      '/parameters/output_compression',
      'not_allowed',
    ],
    [
      'output_compression without output_format (png)',
      { output_compression: 80 },
      '/parameters/output_compression',
      'not_allowed',
    ],
  ];
  for (const [label, extra, pointer, code] of refused) {
    t.test(`${model.id} rejects ${label}`, async (t) => {
      assertSchemaRefuses(t, { model: model.id, prompt: PROMPT, parameters: extra }, pointer, code);
    });
  }
  for (const [label, extra, pointer, code] of refusedByCore) {
    t.test(`${model.id} rejects ${label}`, async (t) => {
      await assertRejectedByBoth(t, { model: model.id, prompt: PROMPT, parameters: extra }, pointer, code);
    });
  }
}

t.test('output_compression with png says why it is refused', async (t) => {
  const api = await newClient();
  const res = await api.post(CREATE, {
    model: 'alpha-pro',
    prompt: PROMPT,
    parameters: { output_compression: 80 },
  });
  t.equal(res.statusCode, 400);
  t.match(res.body.errors?.[0]?.detail, /only with output_format jpeg or webp/);
});

// ── every invalid field at once (decision 0024) ────────────────────────────────────────────────────

/** The field errors of a 400, as [pointer, code] pairs sorted by pointer. */
function fieldErrors(res: { statusCode: number; body: any }): [string, string][] {
  return (res.body.errors ?? [])
    .map((e: { pointer: string; code: string }) => [e.pointer, e.code] as [string, string])
    .sort((a: [string, string], b: [string, string]) => a[0].localeCompare(b[0]));
}

t.test('beta-v5-pro: a short prompt and 4K are both reported, each with its pointer', async (t) => {
  const api = await newClient();
  for (const url of [ESTIMATE, CREATE]) {
    const res = await api.post(url, { model: 'beta-v5-pro', prompt: 'ab', parameters: { resolution: '4K' } });
    t.equal(res.statusCode, 400, url);
    t.equal(res.body.code, 'invalid_request');
    t.strictSame(fieldErrors(res), [
      ['/parameters/resolution', 'not_allowed'],
      ['/prompt', 'too_short'],
    ]);
    const resolution = res.body.errors.find((e: { pointer: string }) => e.pointer === '/parameters/resolution');
    t.equal(resolution.detail, 'Must be one of: 1K, 2K.', "the chosen model's values, not alpha-pro's");
  }
});

t.test('alpha-pro: every invalid field of one body is reported, once each', async (t) => {
  const api = await newClient();
  for (const url of [ESTIMATE, CREATE]) {
    const res = await api.post(url, {
      model: 'alpha-pro',
      prompt: ' ',
      image_reference: ['not-a-uuid', randomUUID(), 'also-not'],
      parameters: {
        aspect_ratio: '2:1',
        resolution: '8K',
        output_format: 'gif',
        output_compression: 101,
        seed: -1,
        steps: 30,
      },
      colour: 'red',
    });
    t.equal(res.statusCode, 400, url);
    t.strictSame(fieldErrors(res), [
      ['/colour', 'unknown_field'],
      ['/image_reference/0', 'too_short'],
      ['/image_reference/2', 'too_short'],
      ['/parameters/aspect_ratio', 'not_allowed'],
      ['/parameters/output_compression', 'out_of_range'],
      ['/parameters/output_format', 'not_allowed'],
      ['/parameters/resolution', 'not_allowed'],
      ['/parameters/seed', 'out_of_range'],
      ['/parameters/steps', 'unknown_field'],
      ['/prompt', 'too_short'],
    ]);
    t.match(res.body.detail, /^body \/\S+: /, 'the summary names the first field');
  }
});

t.test('a body with many invalid fields gets at most 20 errors', async (t) => {
  const api = await newClient();
  const unknown = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`field_${i}`, i]));
  const res = await api.post(CREATE, { model: 'beta-v5-pro', prompt: PROMPT, ...unknown });
  t.equal(res.statusCode, 400);
  t.equal(res.body.errors.length, 20);
  t.ok(res.body.errors.every((e: { code: string }) => e.code === 'unknown_field'));
  t.equal(new Set(res.body.errors.map((e: { pointer: string }) => e.pointer)).size, 20, 'each field once');
});

// ── the routes answer a refused body as the body schema does ────────────────────────────────────

const [ALPHA, BETA] = SEED;
const throughRoutes: [string, unknown][] = [
  [
    'an aspect ratio alpha-pro does not offer',
    { model: 'alpha-pro', prompt: PROMPT, parameters: { aspect_ratio: ALPHA.disallowedRatios[0] } },
  ],
  [
    'beta-v5-pro at 4K',
    { model: 'beta-v5-pro', prompt: PROMPT, parameters: { aspect_ratio: '16:9', resolution: '4K' } },
  ],
  ['a prompt one astral code point too long', { model: 'beta-v5-pro', prompt: GRINNING.repeat(BETA.prompt.max + 1) }],
  ['a prompt of one decomposed é', { model: 'alpha-pro', prompt: E_ACUTE_DECOMPOSED }],
  [
    'one image reference too many',
    { model: 'alpha-pro', prompt: PROMPT, image_reference: uuids(ALPHA.imageReference.max + 1) },
  ],
  [
    'a reference one hex digit short of a UUID',
    { model: 'beta-v5-pro', prompt: PROMPT, image_reference: [randomUUID(), '01890a5d-ac96-774b-bcce-b302099a805'] },
  ],
  ['an unknown field inside parameters', { model: 'alpha-pro', prompt: PROMPT, parameters: { foo: 'bar' } }],
  ['prompt: 123', { model: 'alpha-pro', prompt: 123 }],
  ['model missing', { prompt: PROMPT }],
  ['an unknown model', { model: 'gamma-1', prompt: PROMPT }],
  ['output_format "PNG"', { model: 'beta-v5-pro', prompt: PROMPT, parameters: { output_format: 'PNG' } }],
  [
    'output_compression "80"',
    { model: 'alpha-pro', prompt: PROMPT, parameters: { output_format: 'webp', output_compression: '80' } },
  ],
];

for (const [label, body] of throughRoutes) {
  for (const url of [ESTIMATE, CREATE]) {
    t.test(`${url} answers ${label} with the body schema's 400`, async (t) => {
      const refusal = schemaRefusal(body);
      t.ok(refusal, 'the body schema refuses it');
      const res = await (await newClient()).post(url, body);
      t.equal(res.statusCode, 400, 'status 400');
      t.match(String(res.headers['content-type']), /^application\/problem\+json/, 'problem+json');
      t.equal(res.body.code, 'invalid_request', 'code invalid_request');
      t.equal(res.body.status, 400);
      t.equal(res.body.detail, refusal?.message, "the schema's summary");
      t.strictSame(res.body.errors, refusal?.fieldErrors, "the schema's field errors, and only them");
    });
  }
}
