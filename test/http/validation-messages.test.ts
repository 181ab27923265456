// Not in the PostgreSQL pass: Ajv's errors as field errors, without an app or a store.
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import t from 'tap';
import { fieldErrorOf } from '../../src/contract/validation.js';

/**
 * Every validation keyword's field error reads as a sentence ("Must be at most 100."), never as
 * Ajv's fragment glued to ours ("Must be must be <= 100.").
 */
const ajv = new Ajv({ allErrors: false, strict: false, discriminator: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);

const CASES: [keyword: string, schema: object, data: unknown, detail?: RegExp][] = [
  ['required', { type: 'object', required: ['a'] }, {}],
  ['additionalProperties', { type: 'object', additionalProperties: false }, { b: 1 }],
  ['enum', { enum: ['x', 'y'] }, 'z', /^Must be one of: x, y\.$/],
  ['const', { const: 'x' }, 'z', /^Must be "x"\.$/],
  ['minLength', { type: 'string', minLength: 2 }, 'a'],
  ['maxLength', { type: 'string', maxLength: 1 }, 'ab'],
  ['minItems', { type: 'array', minItems: 1 }, []],
  ['maxItems', { type: 'array', maxItems: 0 }, [1]],
  ['minimum', { type: 'integer', minimum: 1 }, 0, /^Must be at least 1\.$/],
  ['maximum', { type: 'integer', maximum: 100 }, 101, /^Must be at most 100\.$/],
  ['exclusiveMinimum', { type: 'number', exclusiveMinimum: 0 }, 0, /^Must be more than 0\.$/],
  ['exclusiveMaximum', { type: 'number', exclusiveMaximum: 1 }, 1, /^Must be less than 1\.$/],
  ['type', { type: 'integer' }, 'a'],
  ['pattern', { type: 'string', pattern: '^a$' }, 'b'],
  ['format', { type: 'string', format: 'uuid' }, 'b'],
  ['multipleOf', { type: 'integer', multipleOf: 2 }, 3, /^Must be multiple of 2\.$/],
  ['uniqueItems', { type: 'array', uniqueItems: true }, [1, 1]],
  [
    'discriminator',
    {
      type: 'object',
      required: ['m'],
      discriminator: { propertyName: 'm' },
      oneOf: [{ properties: { m: { const: 'a' } } }],
    },
    { m: 'b' },
  ],
];

for (const [keyword, schema, data, detail] of CASES) {
  t.test(keyword, async (t) => {
    const validate = ajv.compile(schema);
    t.notOk(validate(data));
    const error = validate.errors![0];
    t.equal(error.keyword, keyword);
    const field = fieldErrorOf(error, 'body');
    t.match(field.detail, /^[A-Z].*\.$/, `a sentence: ${field.detail}`);
    t.notMatch(field.detail, /must be must/i);
    if (detail) t.match(field.detail, detail);
  });
}

t.test('the finite check of query values', async (t) => {
  const field = fieldErrorOf({ keyword: 'finite', instancePath: '/limit', schemaPath: '#', params: {} }, 'querystring');
  t.match(field, { pointer: '/limit', location: 'query', code: 'out_of_range', detail: /^[A-Z].*\.$/ });
});
