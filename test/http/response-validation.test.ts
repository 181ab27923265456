import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { contractValidator } from '../helpers/response-validation.js';

/** The response check every buildTestApp runs: it finds what a validating client would refuse. */
const validator = contractValidator();
const JSON_TYPE = 'application/json; charset=utf-8';
const entry = (id: string) => ({
  id,
  kind: 'grant',
  amount: 1,
  balance_after: 1,
  task_id: null,
  note: null,
  created_at: '2026-11-26T00:00:00.000Z',
});
const ledgerPage = (id: string) => JSON.stringify({ data: [entry(id)], next_cursor: null });

t.test('a ledger id that is not a uuid breaks the contract; a UUIDv7 does not', async (t) => {
  t.match(validator.check('GET', '/api/v1/account/ledger', 200, JSON_TYPE, ledgerPage('12')), /id must/);
  t.equal(
    validator.check(
      'GET',
      '/api/v1/account/ledger?limit=1',
      200,
      JSON_TYPE,
      ledgerPage('019abdbe-f67b-7ed1-8162-13e420f43e15'),
    ),
    null,
  );
});

t.test('an undeclared status breaks it; answers of no documented operation are not judged', async (t) => {
  t.match(validator.check('GET', '/api/v1/account', 418, JSON_TYPE, '{}'), /declares no 418/);
  t.equal(validator.check('GET', '/api/v1/nothing', 404, JSON_TYPE, '{}'), null);
  t.equal(validator.check('PUT', '/api/v1/account', 405, JSON_TYPE, '{}'), null);
});

t.test('an attempt list past maxItems breaks it', async (t) => {
  const attempt = { attempted_at: '2026-11-26T00:00:00.000Z', status_code: 500, error: null, duration_ms: 1 };
  const delivery = (n: number) =>
    JSON.stringify({
      data: {
        delivery_id: '019abdbe-f67b-7ed1-8162-13e420f43e15',
        task_id: '019abdbe-f67b-7ed1-8162-13e420f43e16',
        event_type: 'image.generation.completed',
        url: 'https://hooks.example.com/x',
        status: 'pending',
        attempt_count: n,
        attempts: Array.from({ length: n }, () => attempt),
        next_attempt_at: null,
        created_at: '2026-11-26T00:00:00.000Z',
      },
    });
  const url = '/api/v1/webhooks/deliveries/019abdbe-f67b-7ed1-8162-13e420f43e15/retry';
  t.equal(validator.check('POST', url, 202, JSON_TYPE, delivery(1000)), null);
  t.match(validator.check('POST', url, 202, JSON_TYPE, delivery(1001)), /must NOT have more than 1000 items/);
});

t.test('buildTestApp rejects an inject whose answer breaks the contract', async (t) => {
  // An app of its own: what is tested is buildTestApp, and the hook added here breaks its answers.
  const { app, newAccount } = await buildTestApp(t);
  const { auth } = await newAccount(10);
  app.addHook('onSend', async (request, _reply, payload) =>
    request.url.startsWith('/api/v1/account/ledger') ? ledgerPage('12') : payload,
  );
  await t.rejects(app.inject({ url: '/api/v1/account/ledger', headers: auth }), /breaks openapi\.yaml/);
});
