/**
 * The reference of every ratio in BENCHMARKS.md (docs/design.md §5): a bare fastify server on the same
 * routes as the service, whose create route validates the same request body schema with the same
 * Ajv configuration and answers a constant. No auth, no store, no logging: what is left of a
 * request once the service's own work is taken away.
 *
 * With STATIC_ROOT set, it also serves that directory under /static/ with `@fastify/static`: the
 * reference of the result download (a file sent as fastify's maintained plugin sends it).
 *
 *   PORT=4000 [STATIC_ROOT=dir] node --import tsx bench/reference-server.ts
 */
import fastifyStatic from '@fastify/static';
import Fastify from 'fastify';
import { GENERATION_REQUEST_SCHEMAS, GenerationRequest } from '../schemas/catalog.js';
import { buildValidatorCompilerFactory } from '../src/http/validation.js';

const port = Number(process.env.PORT ?? 4000);
const JSON_BODY_LIMIT = 1024 * 1024;

const task = (id: string) => ({
  task_id: id,
  status: 'CREATED',
  cost: 25,
  generated: [],
  model: 'alpha-pro',
  prompt: 'a lighthouse at dawn, seen from the sea, in watercolour',
  image_reference: [],
  parameters: { aspect_ratio: '16:9', resolution: '1K' },
  webhook_url: null,
  error: null,
  created_at: '2025-01-01T00:00:00.000Z',
  started_at: null,
  completed_at: null,
});
const CREATED = { data: task('0193c1f0-0000-7000-8000-000000000000') };
// A list page is 20 tasks, as the service returns by default.
const PAGE = {
  data: Array.from({ length: 20 }, (_, i) => task(`0193c1f0-0000-7000-8000-${String(i).padStart(12, '0')}`)),
  next_cursor: 'MDE5M2MxZjA',
};

const app = Fastify({
  logger: false,
  bodyLimit: JSON_BODY_LIMIT,
  schemaController: { compilersFactory: { buildValidator: buildValidatorCompilerFactory() } },
});

// The request body's per-model branches are named schemas, registered as the service registers them.
for (const schema of GENERATION_REQUEST_SCHEMAS) app.addSchema(schema);

app.get('/healthz', async () => ({ status: 'ok' }));

app.post('/api/v1/images/generations', { schema: { body: GenerationRequest } }, async (_request, reply) => {
  reply.header('location', '/api/v1/images/generations/0193c1f0-0000-7000-8000-000000000000');
  return reply.code(202).send(CREATED);
});

app.get('/api/v1/images/generations/:task_id', async () => CREATED);
app.get('/api/v1/images/generations', async () => PAGE);

if (process.env.STATIC_ROOT) await app.register(fastifyStatic, { root: process.env.STATIC_ROOT, prefix: '/static/' });

await app.listen({ host: '127.0.0.1', port });
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
