import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { MODEL_CATALOG, MODEL_IDS, findModel } from '../../../schemas/catalog.js';
import { ModelEnvelope, ModelList } from '../../../schemas/resources.js';
import { notFound } from '../../core/errors.js';
import type { ResolutionCheck } from '../../core/size-plan.js';
import { toModelResource, type ModelResourceOf } from '../../presenters/models.js';
import { AUTHENTICATED_CODES, BEARER_SECURITY, apiSuccess, problemResponses } from '../route-schemas.js';

export const modelRoutes: FastifyPluginAsyncTypebox<{ resolutionCheck: ResolutionCheck }> = async (
  app,
  { resolutionCheck },
) => {
  // The catalog and the backends never change while the process runs: the resources are built once.
  const modelResources = new Map<string, ModelResourceOf>(
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
