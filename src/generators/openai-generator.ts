import OpenAI, { APIConnectionError, APIError, toFile } from 'openai';
import type { ImagesResponse } from 'openai/resources/images';
import { openAiSizeRule, plannedSize, type OpenAiSizeRule } from '../core/size-plan.js';
import { retryAfterMs, upstreamFailure, upstreamFailureOfStatus } from '../core/upstream-failure.js';
import { toExactSizePng } from './exact-size.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from './port.js';
import { generationError, networkFailure, referenceContentType, UpstreamCalls } from './upstream-call.js';

export interface OpenAiImagesGeneratorOptions {
  apiKey: string;
  /** The SDK's baseURL, e.g. https://api.openai.com/v1 or a compatible provider's. */
  baseUrl?: string;
  model: string;
  maxConcurrency: number;
  /** OPENAI_IMAGE_SIZES: `exact` or WIDTHxHEIGHT,…; unset = what the model's name says (src/core/size-plan.ts). */
  imageSizes?: string;
}

/** Error codes of OpenAI's images API for a prompt or image its moderation refused. */
const POLICY_ERROR_CODES = new Set(['moderation_blocked', 'content_policy_violation']);
/** A 429 that no wait will fix: the account is out of credit. */
const QUOTA_ERROR_CODES = new Set(['insufficient_quota', 'billing_hard_limit_reached']);
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
  private readonly sizeRule: OpenAiSizeRule;

  constructor(private readonly options: OpenAiImagesGeneratorOptions) {
    this.sizeRule = openAiSizeRule(options.model, options.imageSizes);
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseUrl,
      // No SDK retries: a retry is a task requeue, which frees the worker slot while it waits.
      maxRetries: 0,
      logLevel: 'off',
    });
    this.calls = new UpstreamCalls(options.maxConcurrency);
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    signal.throwIfAborted();
    const size = plannedSize({ width: input.width, height: input.height }, this.sizeRule);
    const common = {
      model: this.options.model,
      prompt: input.prompt,
      n: 1,
      size: `${size.width}x${size.height}`,
      // GPT image models always answer in base64 and refuse the parameter; others default to URLs.
      ...(/^(gpt-image|chatgpt-image)-/.test(this.options.model) ? {} : { response_format: 'b64_json' as const }),
    };
    const response = await this.calls.run(
      signal,
      async (): Promise<ImagesResponse> => {
        if (input.references.length === 0) {
          const body = { ...common, stream: false } as OpenAI.ImageGenerateParamsNonStreaming;
          return this.client.images.generate(body, { signal });
        }
        const image = await Promise.all(
          input.references.map((bytes, i) => {
            const type = referenceContentType(bytes);
            return toFile(bytes, `reference-${i + 1}.${EXTENSION_OF[type]}`, { type });
          }),
        );
        const body = { ...common, image, stream: false } as OpenAI.ImageEditParamsNonStreaming;
        return this.client.images.edit(body, { signal });
      },
      classifyOpenAiError,
    );
    const data = response.data?.find((item) => typeof item.b64_json === 'string' && item.b64_json.length > 0);
    if (!data?.b64_json) {
      throw generationError(upstreamFailure('upstream_no_image'), { upstream: { reason: 'no b64_json in data' } });
    }
    signal.throwIfAborted();
    return [await toExactSizePng(Buffer.from(data.b64_json, 'base64'), input.width, input.height)];
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
  const retryAfterMillis = Number(error.headers?.get('retry-after-ms'));
  const waitMs =
    Number.isFinite(retryAfterMillis) && retryAfterMillis > 0
      ? retryAfterMillis
      : retryAfterMs(error.headers?.get('retry-after'), new Date());
  return generationError(upstreamFailureOfStatus(error.status), { retryAfterMs: waitMs, upstream });
}
