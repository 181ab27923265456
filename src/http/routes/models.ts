import { OUTPUT_FORMATS } from '../../../schemas/output-format.js';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { MODEL_CATALOG, MODEL_IDS, findModel, type ModelId } from '../../../schemas/catalog.js';
import type { ModelCatalogEntry } from '../../../schemas/model-entry.js';
import { ModelEnvelope, ModelList } from '../../../schemas/resources.js';
import { notFound } from '../../core/errors.js';
import type { ResolutionCheck } from '../../core/size-plan.js';
import { AUTHENTICATED_CODES, BEARER_SECURITY, apiSuccess, problemResponses } from '../route-schemas.js';

/** Per aspect ratio and resolution: the size generated, and whether it is delivered as is, resized, or not at all. */
function nativeSizes(model: ModelCatalogEntry, check: ResolutionCheck) {
  return Object.fromEntries(
    Object.entries(model.pixelSizes).map(([aspectRatio, byResolution]) => [
      aspectRatio,
      Object.fromEntries(
        Object.entries(byResolution).map(([resolution, { width, height }]) => {
          const { native, factor, allowed } = check(model.id, { aspectRatio, resolution, width, height });
          const asGenerated = native.width === width && native.height === height;
          const result = !allowed ? 'unavailable' : asGenerated ? 'native' : 'resized';
          return [resolution, { ...native, result, scale: Math.round(factor * 1000) / 1000 }] as const;
        }),
      ),
    ]),
  );
}

function toModelResource(model: ModelCatalogEntry, check: ResolutionCheck) {
  return {
    // The catalog's entries are exactly the models MODEL_IDS lists.
    id: model.id as ModelId,
    description: model.description,
    prompt_length: model.promptLength,
    image_reference_count: model.imageReferenceCount,
    aspect_ratios: [...model.aspectRatios],
    resolutions: [...model.resolutions],
    output_formats: [...OUTPUT_FORMATS],
    defaults: { aspect_ratio: model.defaults.aspectRatio, resolution: model.defaults.resolution },
    prices: { ...model.prices },
    pixel_sizes: model.pixelSizes,
    native_sizes: nativeSizes(model, check),
  };
}

export const modelRoutes: FastifyPluginAsyncTypebox<{ resolutionCheck: ResolutionCheck }> = async (
  app,
  { resolutionCheck },
) => {
  // The catalog and the backends never change while the process runs: the resources are built once.
  const modelResources = new Map<string, ReturnType<typeof toModelResource>>(
    MODEL_CATALOG.map((model) => [model.id, toModelResource(model, resolutionCheck)]),
  );

  app.get(
    '/models',
    {
      schema: {
        operationId: 'listModels',
        tags: ['models'],
        summary: 'The model catalog: limits, allowed values, defaults, pixel sizes, prices',
        description:
          'Everything a request to a model may contain and what it costs; the request schemas are built from the same catalog.',
        security: BEARER_SECURITY,
        response: { 200: apiSuccess(Type.Ref(ModelList), 'Every model.'), ...problemResponses(AUTHENTICATED_CODES) },
      },
    },
    async () => ({ data: [...modelResources.values()] }),
  );

  app.get(
    '/models/:model',
    {
      schema: {
        operationId: 'getModel',
        tags: ['models'],
        summary: 'One model of the catalog',
        description: 'The catalog entry of one model; an unknown name is a 404.',
        security: BEARER_SECURITY,
        params: Type.Object({
          model: Type.String({
            maxLength: 64,
            pattern: '^[A-Za-z0-9._-]+$',
            examples: [MODEL_IDS[0]],
            description: `One of ${MODEL_IDS.join(', ')}; another name is a 404.`,
          }),
        }),
        response: {
          200: apiSuccess(Type.Ref(ModelEnvelope), 'The model.'),
          ...problemResponses([...AUTHENTICATED_CODES, 'not_found']),
        },
      },
    },
    async (request) => {
      const model = findModel(request.params.model);
      if (!model) throw notFound('Model');
      return { data: modelResources.get(model.id)! };
    },
  );
};
