import { modelBackends, type Config, type GeneratorBackend } from '../config.js';
import { GeminiGenerator } from './gemini-generator.js';
import { LocalRenderer } from './local-renderer.js';
import { OpenAiImagesGenerator } from './openai-generator.js';
import { GenerationError, type GeneratedImage, type GenerationInput, type ImageGenerator } from './port.js';

/** Sends each task to the generator its model is served by. */
export class ModelRoutedGenerator implements ImageGenerator {
  readonly name = 'by-model';

  constructor(private readonly generatorOf: ReadonlyMap<string, ImageGenerator>) {}

  generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    const generator = this.generatorOf.get(input.model);
    if (!generator) {
      // A task of a model this build no longer serves: nothing can run it.
      return Promise.reject(new GenerationError('model_unavailable', `Model ${input.model} is not served.`, false));
    }
    return generator.generate(input, signal);
  }
}

/**
 * The generators of a worker process from ALPHA_PRO_BACKEND / BETA_V5_PRO_BACKEND. Models on the
 * same backend share one client, so that backend's cap on calls in flight covers them all.
 */
export function generatorFromConfig(config: Config): ImageGenerator {
  const byBackend = new Map<GeneratorBackend, ImageGenerator>();
  const generatorOf = new Map<string, ImageGenerator>();
  for (const [model, backend] of Object.entries(modelBackends(config))) {
    let generator = byBackend.get(backend);
    if (!generator) {
      generator = newGenerator(config, backend);
      byBackend.set(backend, generator);
    }
    generatorOf.set(model, generator);
  }
  return new ModelRoutedGenerator(generatorOf);
}

function newGenerator(config: Config, backend: GeneratorBackend): ImageGenerator {
  switch (backend) {
    case 'local':
      return new LocalRenderer();
    case 'gemini':
      return new GeminiGenerator({
        apiKey: required(config.GEMINI_API_KEY, 'GEMINI_API_KEY'),
        baseUrl: config.GEMINI_BASE_URL,
        model: config.GEMINI_MODEL,
        maxConcurrency: config.GEMINI_MAX_CONCURRENCY,
      });
    case 'openai':
      return new OpenAiImagesGenerator({
        apiKey: required(config.OPENAI_API_KEY, 'OPENAI_API_KEY'),
        baseUrl: config.OPENAI_BASE_URL,
        model: required(config.OPENAI_IMAGE_MODEL, 'OPENAI_IMAGE_MODEL'),
        maxConcurrency: config.OPENAI_MAX_CONCURRENCY,
      });
  }
}

/** loadConfig already refused a backend without its settings; this keeps the types honest. */
function required(value: string | undefined, variable: string): string {
  if (value === undefined) throw new Error(`${variable} is not set`);
  return value;
}
