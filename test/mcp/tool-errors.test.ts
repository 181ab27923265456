// Not in the PostgreSQL pass: the MCP tools' error mapping alone, no store.
import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { toolErrorOf } from '../../src/mcp/tool-errors.js';
import { BackendUnavailableError } from '../../src/services/generation-submission.js';
import { RateLimitedError } from '../../src/http/plugins/rate-limit.js';

/** The log a tool call writes to, kept so that a test can see what went to it rather than to the agent. */
function recordingLog() {
  const lines: { level: string; details: object; message: string }[] = [];
  return {
    lines,
    log: {
      warn: (details: object, message: string) => lines.push({ level: 'warn', details, message }),
      error: (details: object, message: string) => lines.push({ level: 'error', details, message }),
    },
  };
}

const problemIn = (result: ReturnType<typeof toolErrorOf>) => {
  const item = result.content[1];
  return item.type === 'text' ? JSON.parse(item.text) : null;
};
const lineOf = (result: ReturnType<typeof toolErrorOf>) =>
  result.content[0].type === 'text' ? result.content[0].text : '';

t.test('a DomainError is its REST problem, field by field', async (t) => {
  const { log } = recordingLog();
  const error = new DomainError('invalid_request', 'body /prompt: Must be at least 3 characters long.', [
    { pointer: '/prompt', location: 'body', code: 'too_short', detail: 'Must be at least 3 characters long.' },
  ]);
  const result = toolErrorOf(error, { requestId: 'req-1', log });
  t.equal(result.isError, true);
  t.match(problemIn(result), {
    type: 'urn:imagegen:problem:invalid_request',
    status: 400,
    code: 'invalid_request',
    request_id: 'req-1',
    errors: [{ pointer: '/prompt', code: 'too_short' }],
  });
  t.equal(
    lineOf(result),
    'Error invalid_request: body /prompt: Must be at least 3 characters long.\n- /prompt (too_short): Must be at least 3 characters long.',
  );
  t.notOk(result.structuredContent, 'no structured content: a client would check it against the output schema');
});

t.test('an unexpected error says nothing of its cause; the log has it', async (t) => {
  const { log, lines } = recordingLog();
  const error = new TypeError("Cannot read properties of undefined (reading 'secret_column')");
  const result = toolErrorOf(error, { requestId: 'req-2', log });
  t.match(problemIn(result), { code: 'internal_error', status: 500 });
  t.notMatch(JSON.stringify(result), /secret_column|TypeError|\bat /, 'no message, no stack');
  t.same(
    lines.map((l) => [l.level, l.message]),
    [['error', 'tool call failed']],
  );
});

t.test('a dependency away is unavailable with a retry hint, and a warning rather than an error', async (t) => {
  const { log, lines } = recordingLog();
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const result = toolErrorOf(refused, { requestId: 'req-3', log });
  t.match(problemIn(result), { code: 'unavailable', status: 503, retry_after_seconds: 5 });
  t.notMatch(JSON.stringify(result), /5432|ECONNREFUSED/);
  t.match(lineOf(result), /Retry after 5 s\.$/);
  t.equal(lines[0].level, 'warn');
});

t.test('a backend known down and a rate-limit window give their own wait; another 429 the usual one', async (t) => {
  const { log } = recordingLog();
  const down = toolErrorOf(new BackendUnavailableError('The backend serving alpha-pro is unavailable.', 42), {
    requestId: 'r',
    log,
  });
  t.match(problemIn(down), { code: 'unavailable', retry_after_seconds: 42 });
  const limited = toolErrorOf(new RateLimitedError('This API key may make 2 creates per minute.', 17), {
    requestId: 'r',
    log,
  });
  t.match(problemIn(limited), { code: 'rate_limited', status: 429, retry_after_seconds: 17 });
  const busy = toolErrorOf(new DomainError('too_many_active_tasks', 'Too many tasks.'), { requestId: 'r', log });
  t.match(problemIn(busy), { code: 'too_many_active_tasks', status: 429, retry_after_seconds: 5 });
  const poor = toolErrorOf(new DomainError('insufficient_tokens', 'Short.'), { requestId: 'r', log });
  t.equal(problemIn(poor).retry_after_seconds, undefined, 'no retry hint where waiting does not help');
});
