import { Type, type Static } from '@sinclair/typebox';
import type { ModelCatalogEntry } from './model-entry.js';
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

const requestBranches = [AlphaProGenerationRequest, BetaV5ProGenerationRequest];

/**
 * The create/estimate body: a `oneOf` discriminated on `model`, so Ajv validates only the chosen
 * model's branch and its errors name that model's field instead of listing every branch.
 */
export const GenerationRequest = Type.Unsafe<Static<typeof AlphaProGenerationRequest> | Static<typeof BetaV5ProGenerationRequest>>({
  type: 'object',
  required: ['model'],
  discriminator: { propertyName: 'model' },
  oneOf: requestBranches,
  description: 'A generation request. `model` selects the limits that apply to the other fields.',
});
export type GenerationRequest = Static<typeof GenerationRequest>;
