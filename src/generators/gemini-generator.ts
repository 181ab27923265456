import { ApiError, GoogleGenAI, type GenerateContentResponse, type Part } from '@google/genai';
import { geminiImageConfig } from '../core/size-plan.js';
import { durationMs, retryAfterMs, upstreamFailure, upstreamFailureOfStatus } from '../core/upstream-failure.js';
import { toExactSizePng } from './exact-size.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from './port.js';
import { generationError, networkFailure, referenceContentType, UpstreamCalls } from './upstream-call.js';

export interface GeminiGeneratorOptions {
  apiKey: string;
  /** The SDK's base URL (httpOptions.baseUrl); undefined = Google's endpoint. */
  baseUrl?: string;
  model: string;
  maxConcurrency: number;
}

/**
 * Finish reasons and prompt block reasons that mean the provider's policy refused the request or
 * its image (FinishReason / BlockedReason of the Gemini API). Any other reply without an image is
 * `upstream_no_image`.
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
    this.client = new GoogleGenAI({
      vertexai: false,
      apiKey: options.apiKey,
      // The image models (previews) are documented on v1beta; SDK 3 defaults to v1.
      apiVersion: 'v1beta',
      // No SDK retries: a retry is a task requeue, which frees the worker slot while it waits.
      httpOptions: options.baseUrl ? { baseUrl: options.baseUrl } : {},
    });
    this.calls = new UpstreamCalls(options.maxConcurrency);
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    signal.throwIfAborted();
    const parts: Part[] = [
      { text: input.prompt },
      ...input.references.map((bytes) => ({
        inlineData: { mimeType: referenceContentType(bytes), data: bytes.toString('base64') },
      })),
    ];
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
          model: this.options.model,
          contents: [{ role: 'user', parts }],
          config: {
            responseModalities: ['IMAGE'],
            imageConfig: geminiImageConfig(this.options.model, input.aspectRatio, input.resolution),
            abortSignal: signal,
            httpOptions: { fetch: recordingFetch },
          },
        }),
      (error) => classifyGeminiError(error, retryAfterHeader),
    );
    const image = firstImage(response);
    signal.throwIfAborted();
    return [await toExactSizePng(Buffer.from(image, 'base64'), input.width, input.height)];
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
  const failure = upstreamFailureOfStatus(error.status);
  const body = parseErrorBody(error.message);
  const waitMs = retryAfterMs(retryAfterHeader, new Date()) ?? retryDelayOf(body);
  const reason = typeof body?.error?.status === 'string' ? body.error.status : undefined;
  return generationError(failure, { retryAfterMs: waitMs, upstream: { status: error.status, reason } });
}

interface GoogleErrorBody {
  error?: { status?: unknown; details?: { '@type'?: unknown; retryDelay?: unknown }[] };
}

/** ApiError's message is the JSON error body (google.rpc.Status) the API answered with. */
function parseErrorBody(message: string): GoogleErrorBody | undefined {
  try {
    const parsed: unknown = JSON.parse(message);
    return typeof parsed === 'object' && parsed !== null ? (parsed as GoogleErrorBody) : undefined;
  } catch {
    return undefined;
  }
}

/** google.rpc.RetryInfo, which the Gemini API puts in the details of its 429s. */
function retryDelayOf(body: GoogleErrorBody | undefined): number | undefined {
  const details = Array.isArray(body?.error?.details) ? body.error.details : [];
  const retryInfo = details.find(
    (d) => typeof d?.['@type'] === 'string' && d['@type'].endsWith('google.rpc.RetryInfo'),
  );
  return durationMs(retryInfo?.retryDelay);
}
