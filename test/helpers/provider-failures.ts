import type { JsonReply } from './fake-upstream.js';
import { geminiReply, openAiReply } from './provider-replies.js';

/**
 * The providers' documented failures, one row each, with where it is documented and what the
 * service makes of it (decision 0011, "Failure classification"). The adapters' tests
 * (test/generators/provider-failures.test.ts) answer each row from the loopback fake and check the
 * adapter's GenerationError; the HTTP tests use the same rows through a task.
 */
export interface DocumentedFailure {
  name: string;
  reply: JsonReply;
  /** Where the body (or its shape) is documented. */
  source: string;
  expect: {
    code: string;
    transient: boolean;
    capacity: boolean;
    retryAfterMs?: number;
    /** Attempts after which this failure is final (undefined: TASK_MAX_ATTEMPTS). */
    maxAttempts?: number;
  };
}

const GEMINI_TROUBLESHOOTING = 'https://ai.google.dev/gemini-api/docs/troubleshooting';
const GOOGLE_ERROR_MODEL = 'https://google.aip.dev/193 (google.rpc.Status, ErrorInfo, QuotaFailure, RetryInfo)';
const GEMINI_RATE_LIMITS = 'https://ai.google.dev/gemini-api/docs/rate-limits';
const GEMINI_FINISH_REASON = 'https://ai.google.dev/api/generate-content#FinishReason';
const OPENAI_ERROR_CODES = 'https://platform.openai.com/docs/guides/error-codes';
const OPENAI_RATE_LIMITS = 'https://platform.openai.com/docs/guides/rate-limits (rate limits in headers)';

const errorInfo = (reason: string) => ({
  '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
  reason,
  domain: 'googleapis.com',
  metadata: { service: 'generativelanguage.googleapis.com' },
});
const quotaFailure = (...quotaIds: string[]) => ({
  '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
  violations: quotaIds.map((quotaId) => ({
    quotaMetric: 'generativelanguage.googleapis.com/generate_content_paid_tier_requests',
    quotaId,
    quotaDimensions: { location: 'global', model: 'gemini-3-pro-image' },
  })),
});
const retryInfo = (retryDelay: string) => ({ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay });
const QUOTA_MESSAGE =
  'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.';

/** A 200 whose candidate has no image, with `finishReason`. */
function geminiNoImage(finishReason: string, parts: unknown[] = []): JsonReply {
  return {
    status: 200,
    json: {
      candidates: [{ ...(parts.length > 0 ? { content: { role: 'model', parts } } : {}), finishReason, index: 0 }],
      usageMetadata: { promptTokenCount: 12, totalTokenCount: 12 },
    },
  };
}

const NO_IMAGE = { code: 'upstream_no_image', transient: true, capacity: false, maxAttempts: 2 };
const OPERATOR = { code: 'generator_unavailable', transient: false, capacity: false };

export const GEMINI_FAILURES: DocumentedFailure[] = [
  {
    name: 'an invalid or expired key: 400 INVALID_ARGUMENT, ErrorInfo API_KEY_INVALID',
    reply: geminiReply.error(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', undefined, [
      errorInfo('API_KEY_INVALID'),
      { '@type': 'type.googleapis.com/google.rpc.LocalizedMessage', locale: 'en-US', message: 'API key not valid.' },
    ]),
    source: `${GEMINI_TROUBLESHOOTING} (400 INVALID_ARGUMENT); ${GOOGLE_ERROR_MODEL}`,
    expect: OPERATOR,
  },
  {
    name: 'billing or region: 400 FAILED_PRECONDITION',
    reply: geminiReply.error(
      400,
      'FAILED_PRECONDITION',
      'Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.',
    ),
    source: `${GEMINI_TROUBLESHOOTING} (400 FAILED_PRECONDITION)`,
    expect: OPERATOR,
  },
  {
    name: 'a key without permission: 403 PERMISSION_DENIED',
    reply: geminiReply.error(403, 'PERMISSION_DENIED', 'Your API key does not have the required permissions.'),
    source: `${GEMINI_TROUBLESHOOTING} (403 PERMISSION_DENIED)`,
    expect: OPERATOR,
  },
  {
    name: 'an unknown model: 404 NOT_FOUND',
    reply: geminiReply.error(
      404,
      'NOT_FOUND',
      'models/gemini-3-pro-image-preview is not found for API version v1beta, or is not supported for generateContent.',
    ),
    source: `${GEMINI_TROUBLESHOOTING} (404 NOT_FOUND)`,
    expect: OPERATOR,
  },
  {
    name: 'a per-minute quota: 429 with RetryInfo and no Retry-After header',
    reply: geminiReply.error(429, 'RESOURCE_EXHAUSTED', QUOTA_MESSAGE, undefined, [
      quotaFailure('GenerateRequestsPerMinutePerProjectPerModel'),
      retryInfo('37s'),
    ]),
    source: `${GEMINI_RATE_LIMITS}; ${GOOGLE_ERROR_MODEL}`,
    expect: { code: 'upstream_rate_limited', transient: true, capacity: true, retryAfterMs: 37_000 },
  },
  {
    name: 'a per-day quota: 429 with a QuotaFailure naming a PerDay quota',
    reply: geminiReply.error(429, 'RESOURCE_EXHAUSTED', QUOTA_MESSAGE, undefined, [
      quotaFailure('GenerateRequestsPerDayPerProjectPerModel'),
      retryInfo('21s'),
    ]),
    source: `${GEMINI_RATE_LIMITS} (requests per day reset at midnight Pacific time); ${GOOGLE_ERROR_MODEL}`,
    expect: { code: 'upstream_quota_exhausted', transient: false, capacity: false, retryAfterMs: 21_000 },
  },
  {
    name: 'no quota at all for the model on this tier: 429, limit 0',
    reply: geminiReply.error(
      429,
      'RESOURCE_EXHAUSTED',
      'You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-3-pro-image',
      undefined,
      [
        {
          '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
          violations: [
            {
              quotaMetric: 'generativelanguage.googleapis.com/generate_content_free_tier_requests',
              quotaId: 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier',
              quotaDimensions: { location: 'global', model: 'gemini-3-pro-image' },
            },
          ],
        },
        retryInfo('50s'),
      ],
    ),
    source: `${GEMINI_RATE_LIMITS} (models without a free tier); ${GOOGLE_ERROR_MODEL}`,
    expect: { ...OPERATOR, retryAfterMs: 50_000 },
  },
  {
    name: 'an overloaded model: 503 UNAVAILABLE',
    reply: geminiReply.error(503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.'),
    source: `${GEMINI_TROUBLESHOOTING} (503 UNAVAILABLE)`,
    expect: { code: 'upstream_unavailable', transient: true, capacity: true },
  },
  {
    name: 'an internal error: 500 INTERNAL',
    reply: geminiReply.error(500, 'INTERNAL', 'An internal error has occurred.'),
    source: `${GEMINI_TROUBLESHOOTING} (500 INTERNAL)`,
    expect: { code: 'upstream_unavailable', transient: true, capacity: false },
  },
  {
    name: 'a malformed request: 400 INVALID_ARGUMENT',
    reply: geminiReply.error(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.'),
    source: `${GEMINI_TROUBLESHOOTING} (400 INVALID_ARGUMENT)`,
    expect: { code: 'upstream_rejected', transient: false, capacity: false },
  },
  {
    name: 'finishReason NO_IMAGE',
    reply: geminiNoImage('NO_IMAGE'),
    source: GEMINI_FINISH_REASON,
    expect: NO_IMAGE,
  },
  {
    name: 'finishReason IMAGE_OTHER',
    reply: geminiNoImage('IMAGE_OTHER'),
    source: GEMINI_FINISH_REASON,
    expect: NO_IMAGE,
  },
  { name: 'finishReason OTHER', reply: geminiNoImage('OTHER'), source: GEMINI_FINISH_REASON, expect: NO_IMAGE },
  {
    name: 'finishReason STOP with text only',
    reply: geminiNoImage('STOP', [{ text: 'Here is a description instead.' }]),
    source: GEMINI_FINISH_REASON,
    expect: NO_IMAGE,
  },
  {
    name: 'finishReason IMAGE_SAFETY',
    reply: geminiNoImage('IMAGE_SAFETY'),
    source: GEMINI_FINISH_REASON,
    expect: { code: 'content_policy', transient: false, capacity: false },
  },
  {
    name: 'a blocked prompt: promptFeedback.blockReason',
    reply: geminiReply.promptBlocked(),
    source: 'https://ai.google.dev/api/generate-content#PromptFeedback',
    expect: { code: 'content_policy', transient: false, capacity: false },
  },
];

export const OPENAI_FAILURES: DocumentedFailure[] = [
  {
    name: 'an invalid key: 401 invalid_api_key',
    reply: openAiReply.error(401, {
      message:
        'Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.',
      type: 'invalid_request_error',
      code: 'invalid_api_key',
    }),
    source: `${OPENAI_ERROR_CODES} (401 Invalid Authentication / Incorrect API key provided)`,
    expect: OPERATOR,
  },
  {
    name: 'an organisation not verified for the model: 403',
    reply: openAiReply.error(403, {
      message:
        'Your organization must be verified to use the model `gpt-image-1`. Please go to: https://platform.openai.com/settings/organization/general and click on Verify Organization. If you just verified, it can take up to 15 minutes for access to propagate.',
      type: 'invalid_request_error',
      code: null,
    }),
    source: 'https://help.openai.com/en/articles/10910291-api-organization-verification',
    expect: OPERATOR,
  },
  {
    name: 'an unknown model: 404 model_not_found',
    reply: openAiReply.error(404, {
      message: 'The model `gpt-image-9` does not exist or you do not have access to it.',
      type: 'invalid_request_error',
      code: 'model_not_found',
    }),
    source: OPENAI_ERROR_CODES,
    expect: OPERATOR,
  },
  {
    name: 'no credit left: 429 insufficient_quota',
    reply: openAiReply.error(429, {
      message: 'You exceeded your current quota, please check your plan and billing details.',
      type: 'insufficient_quota',
      code: 'insufficient_quota',
    }),
    source: `${OPENAI_ERROR_CODES} (429 You exceeded your current quota)`,
    expect: OPERATOR,
  },
  {
    name: 'a rate limit with x-ratelimit-* headers and no Retry-After',
    reply: openAiReply.error(
      429,
      {
        message: 'Rate limit reached for gpt-image-1 on images per minute (IPM): Limit 5, Used 5, Requested 1.',
        type: 'requests',
        code: 'rate_limit_exceeded',
      },
      {
        'x-ratelimit-limit-requests': '5',
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': '12s',
        'x-ratelimit-limit-tokens': '100000',
        'x-ratelimit-remaining-tokens': '99000',
        'x-ratelimit-reset-tokens': '6m0s',
      },
    ),
    source: OPENAI_RATE_LIMITS,
    expect: { code: 'upstream_rate_limited', transient: true, capacity: true, retryAfterMs: 12_000 },
  },
  {
    name: 'a rate limit with retry-after-ms',
    reply: openAiReply.error(
      429,
      { message: 'Rate limit reached.', type: 'requests', code: 'rate_limit_exceeded' },
      { 'retry-after-ms': '1500', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '1m' },
    ),
    source: `${OPENAI_RATE_LIMITS}; the openai SDK reads retry-after-ms before retry-after`,
    expect: { code: 'upstream_rate_limited', transient: true, capacity: true, retryAfterMs: 1500 },
  },
  {
    name: 'moderation: 400 moderation_blocked',
    reply: openAiReply.moderationBlocked(),
    source: 'https://platform.openai.com/docs/guides/image-generation (content moderation)',
    expect: { code: 'content_policy', transient: false, capacity: false },
  },
  {
    name: 'a server error: 500',
    reply: openAiReply.error(500, {
      message: 'The server had an error while processing your request. Sorry about that!',
      type: 'server_error',
      code: null,
    }),
    source: `${OPENAI_ERROR_CODES} (500)`,
    expect: { code: 'upstream_unavailable', transient: true, capacity: false },
  },
  {
    name: 'overloaded: 503',
    reply: openAiReply.error(503, {
      message: 'The engine is currently overloaded, please try again later.',
      type: 'server_error',
      code: null,
    }),
    source: `${OPENAI_ERROR_CODES} (503 Slow Down / overloaded)`,
    expect: { code: 'upstream_unavailable', transient: true, capacity: true },
  },
  {
    name: 'a reply without an image',
    reply: openAiReply.empty(),
    source: 'https://platform.openai.com/docs/api-reference/images/object',
    expect: NO_IMAGE,
  },
];
