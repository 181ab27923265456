import { modelBackends, openAiKeyHeader, upstreamModels, type Config, type GeneratorBackend } from '../config.js';
import { GeminiGenerator } from './gemini-generator.js';
import { LocalRenderer } from './local-renderer.js';
import { OpenAiImagesGenerator } from './openai-generator.js';
import type { ImageGenerator } from './port.js';

/** A backend this deployment uses: the catalog models it serves and its generator. */
export interface ConfiguredBackend {
  backend: GeneratorBackend;
  models: string[];
  generator: ImageGenerator;
}

/**
 * The backends of a worker process from each model's <MODEL>_BACKEND (ALPHA_PRO_BACKEND, …).
 * Models on the same backend share one client and one limit, since they share the provider's quota.
 */
export function configuredBackends(config: Config): ConfiguredBackend[] {
  const byBackend = new Map<GeneratorBackend, ConfiguredBackend>();
  for (const [model, backend] of Object.entries(modelBackends(config))) {
    let configured = byBackend.get(backend);
    if (!configured) {
      configured = { backend, models: [], generator: newGenerator(config, backend) };
      byBackend.set(backend, configured);
    }
    configured.models.push(model);
  }
  return [...byBackend.values()];
}

function newGenerator(config: Config, backend: GeneratorBackend): ImageGenerator {
  switch (backend) {
    case 'local':
      return new LocalRenderer();
    case 'gemini':
      return new GeminiGenerator({
        ...(config.GEMINI_VERTEX_PROJECT === undefined
          ? { apiKey: required(config.GEMINI_API_KEY, 'GEMINI_API_KEY') }
          : { vertex: { project: config.GEMINI_VERTEX_PROJECT, location: config.GEMINI_VERTEX_LOCATION } }),
        baseUrl: config.GEMINI_BASE_URL,
        model: config.GEMINI_MODEL,
        models: upstreamModels(config),
        maxConcurrency: config.GEMINI_MAX_CONCURRENCY,
        maxUpscale: config.MAX_UPSCALE,
      });
    case 'openai':
      return new OpenAiImagesGenerator({
        apiKey: required(config.OPENAI_API_KEY, 'OPENAI_API_KEY'),
        baseUrl: config.OPENAI_BASE_URL,
        apiKeyHeader: openAiKeyHeader(config),
        model: required(config.OPENAI_IMAGE_MODEL, 'OPENAI_IMAGE_MODEL'),
        models: upstreamModels(config),
        maxConcurrency: config.OPENAI_MAX_CONCURRENCY,
        imageSizes: config.OPENAI_IMAGE_SIZES,
        family: config.OPENAI_MODEL_FAMILY,
        quality: config.OPENAI_IMAGE_QUALITY,
        resultUrlsAllowPrivate: config.OPENAI_RESULT_URL_ALLOW_PRIVATE,
        maxUpscale: config.MAX_UPSCALE,
      });
  }
}

/** loadConfig already refused a backend without its settings; this keeps the types honest. */
function required(value: string | undefined, variable: string): string {
  if (value === undefined) throw new Error(`${variable} is not set`);
  return value;
}
