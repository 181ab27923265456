import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { ERROR_CODES } from '../../../schemas/resources.js';

/**
 * The OpenAPI document is generated from the routes' own schemas; shared schemas become
 * components named by their $id.
 */
export async function registerOpenApi(app: FastifyInstance, options: { exposeUi: boolean }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Image Generation API',
        version: '1.0.0',
        description: [
          'Paid image generation by the token. Create a task, then read it by polling, long-polling (`?wait=`) or a signed webhook.',
          '',
          `Errors are RFC 9457 problem details; their stable \`code\` is one of: ${ERROR_CODES.map((c) => `\`${c}\``).join(', ')}.`,
        ].join('\n'),
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from `keys create`.' } },
      },
      tags: [
        { name: 'generations', description: 'Generation tasks' },
        { name: 'account', description: 'Balance, key and ledger' },
        { name: 'media', description: 'Uploaded and generated images' },
        { name: 'models', description: 'The model catalog' },
        { name: 'operations', description: 'Health and metrics' },
        { name: 'webhooks', description: 'Signed event delivery: secret, delivery log, replay' },
      ],
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });

  if (options.exposeUi) {
    await app.register(swaggerUi, { routePrefix: '/docs' });
  }
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  app.get('/openapi.yaml', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('application/yaml; charset=utf-8').send(app.swagger({ yaml: true })),
  );
}
