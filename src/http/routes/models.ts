import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { MODEL_CATALOG, MODEL_IDS, findModel } from '../../../schemas/catalog.js';
import type { ModelCatalogEntry } from '../../../schemas/model-entry.js';
import { ModelEnvelope, ModelList } from '../../../schemas/resources.js';
import { notFound } from '../../core/errors.js';
import { AUTHENTICATED_PROBLEMS, BEARER_SECURITY, problemResponses } from '../route-schemas.js';

function toModelResource(model: ModelCatalogEntry) {
  return {
    id: model.id,
    description: model.description,
    prompt_length: model.promptLength,
    image_reference_count: model.imageReferenceCount,
    aspect_ratios: [...model.aspectRatios],
    resolutions: [...model.resolutions],
    defaults: { aspect_ratio: model.defaults.aspectRatio, resolution: model.defaults.resolution },
    prices: { ...model.prices } as Record<string, number>,
    pixel_sizes: model.pixelSizes,
  };
}

// The catalog never changes while the process runs, so the resources are built once.
const modelResources = MODEL_CATALOG.map(toModelResource);

export const modelRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/models',
    {
      schema: {
        operationId: 'listModels',
        tags: ['models'],
        summary: 'The model catalog: limits, allowed values, defaults, pixel sizes, prices',
        security: BEARER_SECURITY,
        response: { 200: Type.Ref(ModelList), ...problemResponses(...AUTHENTICATED_PROBLEMS) },
      },
    },
    async () => ({ data: modelResources }),
  );

  app.get(
    '/models/:model',
    {
      schema: {
        operationId: 'getModel',
        tags: ['models'],
        summary: 'One model of the catalog',
        security: BEARER_SECURITY,
        params: Type.Object({ model: Type.String({ description: `One of ${MODEL_IDS.join(', ')}.` }) }),
        response: { 200: Type.Ref(ModelEnvelope), ...problemResponses(...AUTHENTICATED_PROBLEMS, 404) },
      },
    },
    async (request) => {
      const model = findModel(request.params.model);
      if (!model) throw notFound('Model');
      return { data: toModelResource(model) };
    },
  );
};

