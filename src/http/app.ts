import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { SHARED_SCHEMAS } from '../../schemas/resources.js';
import type { Config } from '../config.js';
import { publicBaseUrl } from '../config.js';
import { HmacMediaUrlSigner } from '../services/media-url-signer.js';
import { TaskService } from '../services/task-service.js';
import type { Store } from '../store/port.js';
import { registerBearerAuth } from './plugins/auth.js';
import { registerErrorHandling } from './plugins/errors.js';
import { registerOpenApi } from './plugins/openapi.js';
import { generationRoutes } from './routes/generations.js';
import { healthRoutes } from './routes/health.js';
import { modelRoutes } from './routes/models.js';
import { buildValidatorCompilerFactory } from './validation.js';

export interface AppDependencies {
  config: Config;
  store: Store;
  /** HMAC secret for signed media URLs. */
  mediaSigningSecret: string;
  now?: () => Date;
  logger?: boolean | object;
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const JSON_BODY_LIMIT = 1024 * 1024;

/** Builds the whole HTTP app; never listens (the CLI does, tests use inject). */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date());
  const app = Fastify({
    logger: deps.logger ?? { level: deps.config.LOG_LEVEL, redact: ['req.headers.authorization'] },
    bodyLimit: JSON_BODY_LIMIT,
    // A caller's own request id is kept so that both sides can find the same request in their logs.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
    },
    schemaController: { compilersFactory: { buildValidator: buildValidatorCompilerFactory() } },
    ajv: undefined,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // Fastify parses text/plain by default; this API speaks JSON (and multipart where declared), so a
  // text body must be refused with 415 rather than reach the schema as a string.
  app.removeContentTypeParser('text/plain');

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  registerErrorHandling(app);
  await registerOpenApi(app, { exposeUi: true });

  const signer = new HmacMediaUrlSigner(deps.mediaSigningSecret, publicBaseUrl(deps.config), deps.config.SIGNED_URL_TTL_SECONDS);
  const tasks = new TaskService({ store: deps.store, now, maxActiveTasks: deps.config.MAX_ACTIVE_TASKS });

  await app.register(healthRoutes, { readinessChecks: { store: () => deps.store.ping() } });

  await app.register(
    async (api) => {
      registerBearerAuth(api, { store: deps.store, now });
      await api.register(generationRoutes, { tasks, signer, now });
      await api.register(modelRoutes);
    },
    { prefix: '/api/v1' },
  );

  return app;
}
