import { Type, type Static } from '@sinclair/typebox';
import { generationRequestExamples, generationRequestSchemaId, type ModelCatalogEntry } from './model-entry.js';
import type { AspectRatio, Resolution } from './pixel-sizes.js';
import { alphaPro, AlphaProGenerationRequest } from './models/alpha-pro.js';
import { betaV5Pro, BetaV5ProGenerationRequest } from './models/beta-v5-pro.js';

/**
 * The model catalog: the one list of models. Request schemas, pricing, GET /api/v1/models and the
 * OpenAPI document all derive from it; adding a model is adding its module here.
 */
export const MODEL_CATALOG = [alphaPro, betaV5Pro] as const satisfies readonly ModelCatalogEntry[];

export type ModelId = (typeof MODEL_CATALOG)[number]['id'];
export const MODEL_IDS = MODEL_CATALOG.map((m) => m.id) as ModelId[];

const byId = new Map<string, ModelCatalogEntry>(MODEL_CATALOG.map((m) => [m.id, m]));

export function findModel(id: string): ModelCatalogEntry | undefined {
  return byId.get(id);
}

/** The per-model request schemas; each is a named component the create body refers to. */
export const GENERATION_REQUEST_SCHEMAS = [AlphaProGenerationRequest, BetaV5ProGenerationRequest];

/** Every aspect ratio and resolution some model offers, in catalog order (for response enums). */
export const ALL_ASPECT_RATIOS = [...new Set(MODEL_CATALOG.flatMap((m) => m.aspectRatios))] as AspectRatio[];
export const ALL_RESOLUTIONS = [...new Set(MODEL_CATALOG.flatMap((m) => m.resolutions))] as Resolution[];
export const MAX_PROMPT_LENGTH = Math.max(...MODEL_CATALOG.map((m) => m.promptLength.max));
export const MAX_IMAGE_REFERENCES = Math.max(...MODEL_CATALOG.map((m) => m.imageReferenceCount.max));

/**
 * The create/estimate body: a `oneOf` discriminated on `model`, so Ajv validates only the chosen
 * model's branch and its errors name that model's field instead of listing every branch. The
 * OpenAPI document adds the discriminator's `mapping` (Ajv refuses that keyword).
 */
export const GenerationRequest = Type.Unsafe<
  Static<typeof AlphaProGenerationRequest> | Static<typeof BetaV5ProGenerationRequest>
>({
  type: 'object',
  required: ['model'],
  discriminator: { propertyName: 'model' },
  oneOf: MODEL_CATALOG.map((m) => Type.Ref(generationRequestSchemaId(m.id))),
  description: 'A generation request. `model` selects the limits that apply to the other fields.',
  // Named examples of the request body (Swagger UI pre-fills the first one).
  'x-examples': Object.assign({}, ...MODEL_CATALOG.map(generationRequestExamples)),
});
export type GenerationRequest = Static<typeof GenerationRequest>;
