// Not in the PostgreSQL pass: the request fingerprint alone, no store.
import fc from 'fast-check';
import t from 'tap';
import { canonicalJson, jsonRequestFingerprint } from '../../src/services/idempotency.js';

/** The canonical JSON a key's fingerprint is taken over: what it writes, and what it must survive. */

/** The same value with every object's keys in reverse order. */
function keysReversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(keysReversed);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, inner]) => [key, keysReversed(inner)]),
  );
}

t.test('keys are sorted at every depth, array order is kept, undefined is left out or null', async (t) => {
  t.equal(
    canonicalJson({ b: [1, { y: 2, x: [null, undefined, 's'] }], a: undefined, c: {}, 'é"': 'q"' }),
    '{"b":[1,{"x":[null,null,"s"],"y":2}],"c":{},"é\\"":"q\\""}',
  );
  t.equal(canonicalJson([]), '[]');
  t.equal(canonicalJson(undefined), 'null');
  t.equal(canonicalJson('x'), '"x"');
});

t.test('any JSON value: parses back to itself, and its keys order does not change it', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const text = canonicalJson(value);
      t.same(JSON.parse(text), JSON.parse(JSON.stringify(value)));
      t.equal(canonicalJson(keysReversed(value)), text);
    }),
    { numRuns: 300 },
  );
});

t.test('a body nested far deeper than the call stack goes is fingerprinted, not a stack overflow', async (t) => {
  const depth = 200_000;
  const deep = JSON.parse(`{"stream":${'['.repeat(depth)}${']'.repeat(depth)}}`);
  const text = canonicalJson(deep);
  t.equal(text.length, '{"stream":}'.length + 2 * depth);
  t.match(jsonRequestFingerprint('POST', '/v1/images/generations', deep), /^[0-9a-f]{64}$/);
});
