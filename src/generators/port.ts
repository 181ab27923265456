import type { OutputFormat } from '../../schemas/output-format.js';
/**
 * How every result is encoded. Encoding dominates the time of a 4K image (rendered or resized):
 * fast zlib, no per-row filter search, no quantisation.
 */
export const RESULT_PNG_OPTIONS = { compressionLevel: 2, adaptiveFiltering: false, palette: false } as const;

export interface GenerationInput {
  model: string;
  prompt: string;
  aspectRatio: string;
  resolution: string;
  /** Exact output pixel size, decided by the caller from the catalog. */
  width: number;
  height: number;
  /** Encoded bytes (PNG/JPEG/WebP) of the image_reference media, in order; empty for text-to-image. */
  references: Buffer[];
  /** Encoding of the result (the task's output_format); absent = png. */
  outputFormat?: OutputFormat;
  /** Quality 0-100 of a jpeg or webp result (the task's output_compression); absent = the default. */
  outputCompression?: number | null;
  /**
   * The task's seed (0 to 4294967295); absent for a task made before seeds were recorded. The
   * preview renderer draws from it; a backend whose provider takes a seed passes it on.
   */
  seed?: number;
  /** A stable keyed hash of the account (and its end user, when the task names one), for the provider's abuse monitoring (never the ids). */
  safetyIdentifier?: string;
}

/** Tokens a provider reports for one call (OpenAI `usage`, Gemini `usageMetadata`). */
export interface UpstreamUsage {
  inputTokens: number;
  outputTokens: number;
}

/** What a result can be stored as: the content types of the output formats. */
export type ResultContentType = 'image/png' | 'image/jpeg' | 'image/webp';

export interface GeneratedImage {
  bytes: Buffer;
  contentType: ResultContentType;
  width: number;
  height: number;
  /** The pixel size the model returned, when it differed and the image was resized and cropped to ours. */
  resizedFrom?: PixelSize;
  /** What the provider reported the call cost in tokens, when it did. */
  usage?: UpstreamUsage;
}

export interface PixelSize {
  width: number;
  height: number;
}

export interface ImageGenerator {
  readonly name: string;
  /** Rejects promptly with the signal's reason (or an AbortError) once `signal` aborts. */
  generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]>;
  /**
   * One reference as this provider takes it (within its per-image limits), given how many the task
   * has. The worker calls it on each reference as it reads it, before reading the next, so only one
   * raw reference is in memory at a time; generate() sends a prepared one as it is. Absent: the
   * reference goes to generate() as stored.
   */
  prepareReference?(bytes: Buffer, referenceCount: number): Promise<Buffer>;
}

export interface GenerationErrorDetails {
  /** The provider refused the call for capacity (see UpstreamFailure.capacity). */
  capacity?: boolean;
  /** The upstream asked us to wait at least this long before trying again (Retry-After). */
  retryAfterMs?: number;
  /** For the operator's log only, never shown to the client: upstream status and reason. */
  upstream?: { status?: number; reason?: string };
  /** At most this many attempts end in this failure before it is final (UpstreamFailure.maxAttempts). */
  maxAttempts?: number;
}

/**
 * `code` is stable (e.g. 'content_policy', 'upstream_unavailable'); `transient` tells the worker
 * whether retrying the same input may succeed. `message` is shown to the client: never an
 * upstream's own text.
 */
export class GenerationError extends Error {
  readonly retryAfterMs?: number;
  readonly upstream?: { status?: number; reason?: string };
  readonly capacity: boolean;
  readonly maxAttempts?: number;

  constructor(
    readonly code: string,
    message: string,
    readonly transient: boolean,
    details: GenerationErrorDetails = {},
  ) {
    super(message);
    this.name = 'GenerationError';
    this.retryAfterMs = details.retryAfterMs;
    this.capacity = details.capacity ?? false;
    this.upstream = details.upstream;
    this.maxAttempts = details.maxAttempts;
  }
}
