import { ApiError, GoogleGenAI, type GenerateContentResponse, type GoogleGenAIOptions, type Part } from '@google/genai';
import { geminiImageConfig } from '../core/size-plan.js';
import { upstreamFailure } from '../core/upstream-failure.js';
import {
  googleErrorInfoReason,
  googleFailure,
  googleRetryDelayMs,
  retryAfterMs,
  type GoogleRpcStatus,
} from './provider-errors.js';
import { toExactSizeResult } from './exact-size.js';
import {
  GEMINI_INLINE_BUDGET_BYTES,
  GEMINI_REFERENCE_LIMITS,
  prepareReference,
  prepareReferences,
  type ReferenceLimits,
} from './reference-prep.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from './port.js';
import { generationError, networkFailure, UpstreamCalls } from './upstream-call.js';

/**
 * Vertex AI instead of the Gemini API: the project and location the calls go to, authenticated by
 * Google Cloud credentials (Application Default Credentials unless `googleAuthOptions` says
 * otherwise; the tests give a fixed token).
 */
export interface VertexAiTarget {
  project: string;
  location: string;
  googleAuthOptions?: GoogleGenAIOptions['googleAuthOptions'];
}

export type GeminiGeneratorOptions = GeminiGeneratorSettings &
  ({ apiKey: string; vertex?: undefined } | { apiKey?: undefined; vertex: VertexAiTarget });

interface GeminiGeneratorSettings {
  /** The SDK's base URL (httpOptions.baseUrl); undefined = Google's endpoint. */
  baseUrl?: string;
  model: string;
  /** The upstream model per catalog model, where one names its own (`<MODEL>_UPSTREAM_MODEL`); else `model`. */
  models?: Record<string, string>;
  maxConcurrency: number;
  /** MAX_UPSCALE: the largest enlargement of a reply to the catalog size; unset = no limit. */
  maxUpscale?: number;
  /** Per-reference limits; default GEMINI_REFERENCE_LIMITS. */
  referenceLimits?: ReferenceLimits;
}

/**
 * Finish reasons and prompt block reasons that mean the provider's policy refused the request or
 * its image (FinishReason / BlockedReason of the Gemini API). Any other reply without an image
 * (NO_IMAGE, IMAGE_OTHER, OTHER, a STOP with text only) is `upstream_no_image`, tried once more.
 */
const POLICY_FINISH_REASONS = new Set([
  'SAFETY',
  'BLOCKLIST',
  'PROHIBITED_CONTENT',
  'SPII',
  'RECITATION',
  'IMAGE_SAFETY',
  'IMAGE_PROHIBITED_CONTENT',
  'IMAGE_RECITATION',
]);

/**
 * Gemini image models (`alpha-pro`'s catalog is Gemini 3 Pro Image's contract) through the
 * official @google/genai SDK: one generateContent call with the prompt and the references inline,
 * image output only, the aspect ratio and resolution as imageConfig (imageSize only for the models
 * that take it: src/core/size-plan.ts).
 */
export class GeminiGenerator implements ImageGenerator {
  readonly name = 'gemini';
  private readonly client: GoogleGenAI;
  private readonly calls: UpstreamCalls;

  constructor(private readonly options: GeminiGeneratorOptions) {
    // No SDK retries: a retry is a task requeue, which frees the worker slot while it waits.
    const httpOptions = options.baseUrl ? { baseUrl: options.baseUrl } : {};
    this.client = options.vertex
      ? // Vertex AI: projects/{project}/locations/{location}/publishers/google/models/{model}, on the
        // SDK's Vertex API version (v1beta1, where the image previews are).
        new GoogleGenAI({
          vertexai: true,
          project: options.vertex.project,
          location: options.vertex.location,
          googleAuthOptions: options.vertex.googleAuthOptions,
          httpOptions,
        })
      : new GoogleGenAI({
          vertexai: false,
          apiKey: options.apiKey,
          // The image models (previews) are documented on v1beta; SDK 3 defaults to v1.
          apiVersion: 'v1beta',
          httpOptions,
        });
    this.calls = new UpstreamCalls(options.maxConcurrency);
  }

  /** The per-image limit, and each reference's share of the inline request budget. */
  private referenceLimits(referenceCount: number): ReferenceLimits {
    const limits = this.options.referenceLimits ?? GEMINI_REFERENCE_LIMITS;
    const share = Math.floor(GEMINI_INLINE_BUDGET_BYTES / Math.max(1, referenceCount));
    return { ...limits, maxBytes: Math.min(limits.maxBytes, share) };
  }

  async prepareReference(bytes: Buffer, referenceCount: number): Promise<Buffer> {
    return (await prepareReference(bytes, this.referenceLimits(referenceCount))).bytes;
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    signal.throwIfAborted();
    // Within the provider's per-image limit, prepared one at a time (decision 0011); one
    // the worker prepared already is sent as it is.
    const references = await prepareReferences(input.references, this.referenceLimits(input.references.length), signal);
    const parts: Part[] = [
      { text: input.prompt },
      ...references.map(({ bytes, type }) => ({ inlineData: { mimeType: type, data: bytes.toString('base64') } })),
    ];
    const model = this.options.models?.[input.model] ?? this.options.model;
    // The SDK's error keeps the status but not the headers; Retry-After is read off the response.
    let retryAfterHeader: string | null = null;
    const recordingFetch: typeof fetch = async (url, init) => {
      const response = await fetch(url, init);
      if (!response.ok) retryAfterHeader = response.headers.get('retry-after');
      return response;
    };
    const response = await this.calls.run(
      signal,
      () =>
        this.client.models.generateContent({
          model,
          contents: [{ role: 'user', parts }],
          config: {
            responseModalities: ['IMAGE'],
            imageConfig: geminiImageConfig(model, input.aspectRatio, input.resolution),
            ...(input.seed === undefined ? {} : { seed: geminiSeed(input.seed) }),
            abortSignal: signal,
            httpOptions: { fetch: recordingFetch },
          },
        }),
      (error) => classifyGeminiError(error, retryAfterHeader),
    );
    const image = firstImage(response);
    signal.throwIfAborted();
    const result = await toExactSizeResult(Buffer.from(image, 'base64'), input, this.options.maxUpscale);
    const usage = response.usageMetadata;
    if (!usage) return [result];
    // Output tokens: the candidates' and the model's thoughts (both billed as output).
    const outputTokens = (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0);
    return [{ ...result, usage: { inputTokens: usage.promptTokenCount ?? 0, outputTokens } }];
  }
}

/** The final image's base64 data; throws the permanent failure a reply without one means. */
function firstImage(response: GenerateContentResponse): string {
  const blockReason = response.promptFeedback?.blockReason;
  if (blockReason) {
    throw generationError(upstreamFailure('content_policy'), {
      upstream: { reason: `prompt blocked: ${blockReason}` },
    });
  }
  const candidate = response.candidates?.[0];
  // Gemini 3 image models may return interim "thought" images before the final one.
  const image = candidate?.content?.parts?.find(
    (part) => !part.thought && part.inlineData?.data && part.inlineData.mimeType?.startsWith('image/'),
  );
  if (image?.inlineData?.data) return image.inlineData.data;
  const finishReason = candidate?.finishReason;
  const reason = finishReason ? `finish reason ${finishReason}` : 'no candidate';
  const kind = finishReason && POLICY_FINISH_REASONS.has(finishReason) ? 'content_policy' : 'upstream_no_image';
  throw generationError(upstreamFailure(kind), { upstream: { reason } });
}

function classifyGeminiError(error: unknown, retryAfterHeader: string | null) {
  if (!(error instanceof ApiError)) return networkFailure(error);
  const body = parseErrorBody(error.message);
  const failure = googleFailure(error.status, body);
  const waitMs = retryAfterMs(retryAfterHeader, new Date()) ?? googleRetryDelayMs(body);
  const reason =
    [body?.status, googleErrorInfoReason(body)].filter((r) => typeof r === 'string').join(' ') || undefined;
  return generationError(failure, { retryAfterMs: waitMs, upstream: { status: error.status, reason } });
}

/** ApiError's message is the JSON error body ({error: google.rpc.Status}) the API answered with. */
function parseErrorBody(message: string): GoogleRpcStatus | undefined {
  try {
    const parsed = JSON.parse(message) as { error?: unknown } | null;
    const status = typeof parsed === 'object' && parsed !== null ? parsed.error : undefined;
    return typeof status === 'object' && status !== null ? (status as GoogleRpcStatus) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A task's seed (0 to 4294967295) as Gemini's GenerationConfig.seed, a signed 32-bit integer: the
 * same 32 bits read as signed, so that every seed is a distinct Gemini seed (4294967295 is -1).
 * Gemini makes a best effort to answer the same for the same seed, not a promise.
 */
export function geminiSeed(seed: number): number {
  return seed | 0;
}
