import OpenAI, { APIConnectionError, APIError, toFile } from 'openai';
import type { ImagesResponse } from 'openai/resources/images';
import {
  openAiModelFamily,
  openAiSizeRule,
  plannedSize,
  type OpenAiModelFamily,
  type OpenAiSizeRule,
} from '../core/size-plan.js';
import { upstreamFailure, upstreamFailureOfStatus } from '../core/upstream-failure.js';
import { rateLimitResetMs, retryAfterMs } from './provider-errors.js';
import { toExactSizeResult } from './exact-size.js';
import type { LookupAll } from '../webhooks/ssrf-guard.js';
import { downloadResult } from './image-download.js';
import {
  OPENAI_REFERENCE_LIMITS,
  prepareReference,
  prepareReferences,
  type ReferenceLimits,
} from './reference-prep.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from './port.js';
import { generationError, networkFailure, UpstreamCalls } from './upstream-call.js';

export interface OpenAiImagesGeneratorOptions {
  apiKey: string;
  /** The SDK's baseURL, e.g. https://api.openai.com/v1, a compatible provider's, or Azure OpenAI's v1 endpoint. */
  baseUrl?: string;
  /** How the key is sent: `authorization` (Bearer; default) or `api-key` (Azure OpenAI). */
  apiKeyHeader?: 'authorization' | 'api-key';
  model: string;
  /** The upstream model per catalog model, where one names its own (`<MODEL>_UPSTREAM_MODEL`); else `model`. */
  models?: Record<string, string>;
  maxConcurrency: number;
  /** MAX_UPSCALE: the largest enlargement of a reply to the catalog size; unset = no limit. */
  maxUpscale?: number;
  /** Per-reference limits; default OPENAI_REFERENCE_LIMITS. */
  referenceLimits?: ReferenceLimits;
  /** OPENAI_IMAGE_SIZES: `exact` or WIDTHxHEIGHT,…; unset = what the model's name says (src/core/size-plan.ts). */
  imageSizes?: string;
  /** OPENAI_MODEL_FAMILY: which parameters the model takes; unset = what its name says. */
  family?: OpenAiModelFamily;
  /** OPENAI_RESULT_URL_ALLOW_PRIVATE: a result URL may point to a private address (tests). */
  resultUrlsAllowPrivate?: boolean;
  /** Resolves a result URL's host (tests: a stub); default the system's. */
  resultUrlLookup?: LookupAll;
  /** OPENAI_IMAGE_QUALITY: sent to the models that take it (loadConfig checked the value); unset = not sent. */
  quality?: string;
}

/** Error codes of OpenAI's images API for a prompt or image its moderation refused. */
const POLICY_ERROR_CODES = new Set(['moderation_blocked', 'content_policy_violation']);
/** A 429 that no wait will fix: the account is out of credit. */
const QUOTA_ERROR_CODES = new Set(['insufficient_quota', 'billing_hard_limit_reached']);
/** The values `quality` takes on images.edit (dall-e-3's `hd` aside: DALL·E 3 makes no edits). */
type ImageQuality = NonNullable<OpenAI.ImageEditParams['quality']>;
const EXTENSION_OF = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' } as const;

/**
 * Any model behind the OpenAI images API shape (OpenAI's own or a compatible provider's), through
 * the official `openai` SDK: text-to-image is images.generate, image-to-image is images.edit with
 * the references as `image[]` files; `size` is one the model accepts (the size plan), and the
 * reply is resized to the catalog's exact size; results as base64.
 */
export class OpenAiImagesGenerator implements ImageGenerator {
  readonly name = 'openai';
  private readonly client: OpenAI;
  private readonly calls: UpstreamCalls;
  /** Family and size rule per upstream model (a catalog model may name its own). */
  private readonly plans = new Map<string, { family: OpenAiModelFamily; sizeRule: OpenAiSizeRule }>();

  constructor(private readonly options: OpenAiImagesGeneratorOptions) {
    this.planOf(options.model); // a bad OPENAI_IMAGE_SIZES fails here, at start
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseUrl,
      // No SDK retries: a retry is a task requeue, which frees the worker slot while it waits.
      maxRetries: 0,
      logLevel: 'off',
      // Azure OpenAI's v1 endpoint takes the key as `api-key`: the Bearer header is dropped (null
      // removes a header the SDK would send), so the key goes in one header only.
      ...(options.apiKeyHeader === 'api-key' && { defaultHeaders: { 'api-key': options.apiKey, Authorization: null } }),
    });
    this.calls = new UpstreamCalls(options.maxConcurrency);
  }

  private planOf(model: string) {
    let plan = this.plans.get(model);
    if (!plan) {
      const family = openAiModelFamily(model, this.options.family);
      plan = { family, sizeRule: openAiSizeRule(model, this.options.imageSizes, family) };
      this.plans.set(model, plan);
    }
    return plan;
  }

  async prepareReference(bytes: Buffer): Promise<Buffer> {
    return (await prepareReference(bytes, this.options.referenceLimits ?? OPENAI_REFERENCE_LIMITS)).bytes;
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    signal.throwIfAborted();
    const model = this.options.models?.[input.model] ?? this.options.model;
    const { family, sizeRule } = this.planOf(model);
    const size = plannedSize({ width: input.width, height: input.height }, sizeRule);
    const common = {
      model,
      prompt: input.prompt,
      n: 1,
      size: `${size.width}x${size.height}`,
      // GPT image models always answer in base64 and refuse the parameter; others default to URLs.
      // No `stream`: non-streaming is every model's default, and only GPT image models take it.
      ...(family === 'gpt-image' ? {} : { response_format: 'b64_json' as const }),
      // OpenAI's own models: the account's keyed hash, so abuse is traced to it, not to our whole
      // organisation. Not to other providers, which may refuse a parameter they do not know.
      ...(family !== 'other' && input.safetyIdentifier ? { safety_identifier: input.safetyIdentifier } : {}),
      // A compatible provider's model is sent no quality (loadConfig refuses one set for it).
      ...(family !== 'other' && this.options.quality ? { quality: this.options.quality as ImageQuality } : {}),
    };
    // Within the provider's per-image limit, prepared one at a time (decision 0011); one
    // the worker prepared already is sent as it is.
    const references = await prepareReferences(
      input.references,
      this.options.referenceLimits ?? OPENAI_REFERENCE_LIMITS,
      signal,
    );
    const response = await this.calls.run(
      signal,
      async (): Promise<ImagesResponse> => {
        if (references.length === 0) {
          const body: OpenAI.ImageGenerateParamsNonStreaming = common;
          return this.client.images.generate(body, { signal });
        }
        const image = await Promise.all(
          references.map(({ bytes, type }, i) => toFile(bytes, `reference-${i + 1}.${EXTENSION_OF[type]}`, { type })),
        );
        const body: OpenAI.ImageEditParamsNonStreaming = { ...common, image };
        return this.client.images.edit(body, { signal });
      },
      classifyOpenAiError,
    );
    // Base64, or a URL (compatible providers that ignore response_format): downloaded, bounded.
    const data = response.data?.find((item) => Boolean(item.b64_json) || Boolean(item.url));
    if (!data) {
      throw generationError(upstreamFailure('upstream_no_image'), { upstream: { reason: 'no image in data' } });
    }
    const bytes = data.b64_json
      ? Buffer.from(data.b64_json, 'base64')
      : await downloadResult(
          data.url!,
          {
            apiBaseUrl: this.options.baseUrl,
            allowPrivate: this.options.resultUrlsAllowPrivate ?? false,
            lookup: this.options.resultUrlLookup,
          },
          signal,
        );
    signal.throwIfAborted();
    const image = await toExactSizeResult(bytes, input, this.options.maxUpscale);
    const usage = response.usage;
    return [
      usage ? { ...image, usage: { inputTokens: usage.input_tokens, outputTokens: usage.output_tokens } } : image,
    ];
  }
}

function classifyOpenAiError(error: unknown) {
  if (error instanceof APIConnectionError || !(error instanceof APIError) || error.status === undefined) {
    return networkFailure(error);
  }
  const code = typeof error.code === 'string' ? error.code : undefined;
  const upstream = { status: error.status, reason: code ?? (typeof error.type === 'string' ? error.type : undefined) };
  if (code && POLICY_ERROR_CODES.has(code)) return generationError(upstreamFailure('content_policy'), { upstream });
  if (code && QUOTA_ERROR_CODES.has(code))
    return generationError(upstreamFailure('generator_unavailable'), { upstream });
  const header = (name: string) => error.headers?.get(name);
  const retryAfterMillis = Number(header('retry-after-ms'));
  // Retry-After first; else the reset of an exhausted x-ratelimit-* limit counts as one.
  const waitMs =
    Number.isFinite(retryAfterMillis) && retryAfterMillis > 0
      ? retryAfterMillis
      : (retryAfterMs(header('retry-after'), new Date()) ?? rateLimitResetMs(header));
  return generationError(upstreamFailureOfStatus(error.status), { retryAfterMs: waitMs, upstream });
}
