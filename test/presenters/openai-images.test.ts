import t from 'tap';
import {
  openAiErrorOf,
  openAiFieldErrors,
  openAiImagesBody,
  openAiTaskFailure,
  openAiWaitExpired,
} from '../../src/presenters/openai-images.js';

t.test('the service’s errors take OpenAI’s statuses, types and codes', async (t) => {
  t.match(openAiErrorOf('unauthorized', 'no'), {
    status: 401,
    body: { error: { type: 'invalid_request_error', code: 'invalid_api_key', param: null } },
  });
  t.match(openAiErrorOf('insufficient_tokens', 'poor'), {
    status: 429,
    body: { error: { type: 'insufficient_quota', code: 'insufficient_quota' } },
    shouldRetry: false,
  });
  t.match(openAiErrorOf('rate_limited', 'slow down'), {
    status: 429,
    body: { error: { type: 'requests', code: 'rate_limit_exceeded' } },
  });
  t.match(openAiErrorOf('too_many_active_tasks', 'wait'), {
    status: 429,
    body: { error: { code: 'rate_limit_exceeded' } },
  });
  t.match(openAiErrorOf('unavailable', 'down'), { status: 503, body: { error: { type: 'server_error' } } });
  t.match(openAiErrorOf('idempotency_in_progress', 'busy'), { status: 409 });
});

t.test('field errors name the first param and list every one', async (t) => {
  const one = openAiErrorOf('invalid_request', 'header /idempotency-key: bad', [
    { pointer: '/idempotency-key', location: 'header', code: 'too_long', detail: 'bad' },
  ]);
  t.match(one, {
    status: 400,
    body: { error: { param: 'idempotency-key', code: 'invalid_value', message: 'header /idempotency-key: bad' } },
  });
  const several = openAiFieldErrors([
    { param: 'size', message: 'size is wrong.' },
    { param: 'n', message: 'n is wrong.' },
  ]);
  t.same(several.body.error, {
    message: 'size: size is wrong. n: n is wrong.',
    type: 'invalid_request_error',
    param: 'size',
    code: 'invalid_value',
  });
});

t.test('a refused prompt is 400 moderation_blocked; another failure a 500 naming its code and task', async (t) => {
  t.match(openAiTaskFailure({ id: 'T1', error: { code: 'content_policy', message: 'Refused.' } }), {
    status: 400,
    body: { error: { code: 'moderation_blocked', param: 'prompt', message: /T1.*refunded/ } },
    shouldRetry: false,
  });
  t.match(openAiTaskFailure({ id: 'T2', error: { code: 'upstream_error', message: 'Down.' } }), {
    status: 500,
    body: { error: { code: 'upstream_error', type: 'server_error', message: /T2/ } },
  });
});

t.test('a spent wait names the tasks; a retry is allowed only with an Idempotency-Key', async (t) => {
  t.match(openAiWaitExpired(['A', 'B'], 300, false), {
    status: 504,
    shouldRetry: false,
    body: { error: { code: 'generation_timeout', message: /300 s.*A, B/ } },
  });
  t.match(openAiWaitExpired(['A'], 300, true), {
    shouldRetry: true,
    body: { error: { message: /same Idempotency-Key/ } },
  });
});

t.test('the images answer reports the size made and the tokens charged as usage', async (t) => {
  const body = openAiImagesBody({
    created: new Date('2026-01-01T00:00:01.900Z'),
    images: [{ b64_json: 'AA==' }, { b64_json: 'AQ==' }],
    tasks: [
      { cost: 25, width: 1264, height: 848 },
      { cost: 25, width: 1264, height: 848 },
    ],
    quality: 'auto',
    outputFormat: 'png',
  });
  t.same(body, {
    created: 1767225601,
    data: [{ b64_json: 'AA==' }, { b64_json: 'AQ==' }],
    size: '1264x848',
    quality: 'auto',
    output_format: 'png',
    background: 'opaque',
    usage: {
      input_tokens: 0,
      output_tokens: 50,
      total_tokens: 50,
      input_tokens_details: { text_tokens: 0, image_tokens: 0 },
    },
  });
});
