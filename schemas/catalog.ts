import { Type, type Static } from '@sinclair/typebox';
import { generationRequestExamples, generationRequestSchemaId, type ModelCatalogEntry } from './model-entry.js';
import type { AspectRatio, Resolution } from './pixel-sizes.js';
import { MODEL_MODULES } from './models/index.js';

type ModelModuleOfList = (typeof MODEL_MODULES)[number];

/**
 * The model catalog, in the order of the module list (`schemas/models/index.ts`). Request
 * schemas, pricing, GET /api/v1/models and the OpenAPI document all derive from it.
 */
export const MODEL_CATALOG: readonly ModelModuleOfList['entry'][] = MODEL_MODULES.map((m) => m.entry);

export type ModelId = ModelModuleOfList['entry']['id'];
export const MODEL_IDS = MODEL_CATALOG.map((m) => m.id) as ModelId[];

const byId = new Map<string, ModelCatalogEntry>(MODEL_CATALOG.map((m) => [m.id, m]));
// Two modules with one id would share a URL, a schema component and the same variables.
if (byId.size !== MODEL_CATALOG.length) throw new Error(`Two model modules share an id: ${MODEL_IDS.join(', ')}`);

export function findModel(id: string): ModelCatalogEntry | undefined {
  return byId.get(id);
}

/** The per-model request schemas; each is a named component the create body refers to. */
export const GENERATION_REQUEST_SCHEMAS: readonly ModelModuleOfList['requestSchema'][] = MODEL_MODULES.map(
  (m) => m.requestSchema,
);

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
export const GenerationRequest = Type.Unsafe<Static<ModelModuleOfList['requestSchema']>>({
  type: 'object',
  required: ['model'],
  discriminator: { propertyName: 'model' },
  oneOf: MODEL_CATALOG.map((m) => Type.Ref(generationRequestSchemaId(m.id))),
  description: 'A generation request. `model` selects the limits that apply to the other fields.',
  // Named examples of the request body (Swagger UI pre-fills the first one).
  'x-examples': Object.assign({}, ...MODEL_CATALOG.map(generationRequestExamples)),
});
export type GenerationRequest = Static<typeof GenerationRequest>;
