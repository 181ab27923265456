// Not in the PostgreSQL pass: the OpenAPI document the routes make; no request reaches the store.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { parse } from 'yaml';
import { renderOpenApiYaml } from '../../scripts/openapi-document.js';
import { ERROR_CODES } from '../../schemas/resources.js';
import { fileTestApp } from '../helpers/app.js';

const committed = readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8');
const ctx = fileTestApp();

t.test(
  'the committed openapi.yaml is what the routes generate (run `npm run openapi` after changing a route)',
  async (t) => {
    t.equal(await renderOpenApiYaml(), committed);
  },
);

t.test('the document is valid OpenAPI 3', async (t) => {
  const validator = new Validator();
  const result = await validator.validate(parse(committed));
  t.same(result.errors ?? [], [], 'no validation errors');
  t.equal(result.valid, true);
  t.match(validator.version, /^3\./);
});

t.test('shared schemas are components named after them, and error responses are documented', async (t) => {
  const document = parse(committed);
  for (const name of ['Task', 'TaskEnvelope', 'GeneratedItem', 'Problem', 'Model']) {
    t.ok(document.components.schemas[name], `component ${name}`);
  }
  const create = document.paths['/api/v1/images/generations'].post;
  for (const status of ['400', '401', '402', '422', '429', '500']) {
    t.ok(create.responses[status]?.content['application/problem+json'], `create documents ${status} as problem+json`);
  }
  t.same(
    document.components.schemas.Problem.properties.code.enum,
    [...ERROR_CODES],
    'every stable error code is listed',
  );
  const body = create.requestBody.content['application/json'].schema;
  t.equal(body.discriminator.propertyName, 'model');
  t.equal(body.oneOf.length, 2, 'one branch per model');
});

t.test('YAML 1.1 and 1.2 parsers read the same document, the one /openapi.json serves', async (t) => {
  const { app } = ctx();
  const served = (await app.inject({ url: '/openapi.json' })).json();
  const servedYaml = (await app.inject({ url: '/openapi.yaml' })).body;
  t.equal(servedYaml, committed, '/openapi.yaml serves the committed text');
  // PyYAML and other 1.1 parsers read an unquoted 16:9 as the integer 969 (base 60), and yes/no as booleans.
  t.same(parse(committed, { version: '1.1' }), served, 'read as YAML 1.1');
  t.same(parse(committed, { version: '1.2' }), served, 'read as YAML 1.2');
  t.ok(committed.includes('- "16:9"'), 'the ratios are quoted strings');
});
