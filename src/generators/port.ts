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
}

export interface GeneratedImage {
  bytes: Buffer;
  contentType: 'image/png';
  width: number;
  height: number;
}

export interface ImageGenerator {
  readonly name: string;
  /** Rejects promptly with the signal's reason (or an AbortError) once `signal` aborts. */
  generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]>;
}

/**
 * `code` is stable (e.g. 'generator_unavailable', 'content_rejected'); `transient` tells the
 * worker whether retrying the same input may succeed.
 */
export class GenerationError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
    this.name = 'GenerationError';
  }
}
