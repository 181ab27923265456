// biome-ignore-all lint/suspicious/noExplicitAny: addDiscriminatorMappings walks the OpenAPI document, a JSON tree of any shape
import { stringify as stringifyYaml } from 'yaml';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { ERROR_CODES } from '../../../schemas/resources.js';
import { WEBHOOK_EVENT_TYPES, webhookEventSchemaId } from '../../../schemas/webhooks.js';

const COMPONENT_SCHEMAS = '#/components/schemas/';

/**
 * The OpenAPI 3.1 `webhooks`: one POST per event, as the webhook sender makes it (Standard
 * Webhooks headers, the event as its body); what the receiver answers decides the retries.
 */
function webhookOperations() {
  const header = (name: string, schema: Record<string, unknown>, description: string) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema,
  });
  const parameters = [
    header(
      'webhook-id',
      { type: 'string', format: 'uuid', maxLength: 36 },
      'The delivery id: the same on every attempt, so receivers can drop repeats.',
    ),
    header(
      'webhook-timestamp',
      { type: 'string', maxLength: 12, pattern: '^[0-9]+$' },
      'Unix seconds of this attempt; refuse it when far from your clock (replays).',
    ),
    header(
      'webhook-signature',
      { type: 'string', maxLength: 200, pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)?$' },
      '`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`, keyed by the base64 after `whsec_` of ' +
        'GET /api/v1/webhooks/secret; two space-separated signatures while a rotated-out secret still signs.',
    ),
  ];
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `on${webhookEventSchemaId(type)}`,
          tags: ['webhooks'],
          summary: `Sent to a task's webhook_url on ${type}`,
          description:
            'Signed per Standard Webhooks. Answer 2xx to acknowledge; anything else, a redirect or a timeout is retried ' +
            '(immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h, with jitter); 410 stops the retries.',
          security: [],
          parameters,
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: `${COMPONENT_SCHEMAS}${webhookEventSchemaId(type)}` } } },
          },
          responses: {
            '200': { description: 'Received (any 2xx).' },
            '410': { description: 'Gone: no more attempts for this delivery.' },
          },
        },
      },
    ]),
  );
}

/**
 * Adds `mapping` to each discriminator over `oneOf` references, from the constant the referenced
 * schema gives the discriminating property. Ajv refuses `mapping`, so the route schemas cannot
 * carry it; generated clients and linters want it.
 */
function addDiscriminatorMappings(document: Record<string, any>): void {
  const schemas: Record<string, any> = document.components?.schemas ?? {};
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const schema = node as Record<string, any>;
    const property = schema.discriminator?.propertyName;
    if (typeof property === 'string' && Array.isArray(schema.oneOf) && !schema.discriminator.mapping) {
      const mapping: Record<string, string> = {};
      for (const branch of schema.oneOf) {
        const ref =
          typeof branch?.$ref === 'string' && branch.$ref.startsWith(COMPONENT_SCHEMAS) ? branch.$ref : undefined;
        // @fastify/swagger writes a `const` as a one-value `enum`.
        const branchProperty = ref && schemas[ref.slice(COMPONENT_SCHEMAS.length)]?.properties?.[property];
        const value =
          branchProperty?.const ?? (branchProperty?.enum?.length === 1 ? branchProperty.enum[0] : undefined);
        if (typeof value === 'string') mapping[value] = ref!;
      }
      schema.discriminator = { ...schema.discriminator, mapping };
    }
    Object.values(schema).forEach(visit);
  };
  visit(document);
}

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
          'Image-to-image: upload each reference image first (`POST /api/v1/media`), then name the returned `media_id`s',
          'in `image_reference`. Ids are UUIDs and may be sent in either case.',
          '',
          `Errors are RFC 9457 problem details; their stable \`code\` is one of: ${ERROR_CODES.map((c) => `\`${c}\``).join(', ')}.`,
          'Each operation lists the codes it can answer with.',
        ].join('\n'),
      },
      // Relative: the origin that serves this document (PUBLIC_BASE_URL), so that Swagger UI calls
      // the server it was loaded from. Generated clients take the origin as their base URL.
      servers: [
        {
          url: '/',
          description: 'This server, local or production: the origin that serves this document.',
          'x-internal': false,
        } as never,
      ],
      security: [{ bearerAuth: [] }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from `keys create`.' },
          adminAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An admin key from `admin-keys create` or ADMIN_API_KEY; never an account key.',
          },
        },
      },
      tags: [
        { name: 'generations', description: 'Generation tasks' },
        { name: 'account', description: 'Balance, key and ledger' },
        { name: 'media', description: 'Uploaded and generated images' },
        { name: 'models', description: 'The model catalog' },
        { name: 'operations', description: 'Health and metrics' },
        { name: 'webhooks', description: 'Signed event delivery: secret, delivery log, replay' },
        {
          name: 'admin',
          description:
            'Operating the business under /admin/v1, with an admin key: accounts, scoped keys, grants, ledger, usage, audit log',
        },
        {
          name: 'openai',
          description:
            'The OpenAI Images API face under /v1: the official SDKs and the AI SDK work with only a base URL and a key',
        },
      ],
      webhooks: webhookOperations() as never,
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    transformObject: (documentObject) => {
      const generated = 'openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject;
      // A copy without shared objects, so the YAML has no anchors and aliases, which some tools mishandle.
      const document = JSON.parse(JSON.stringify(generated)) as Record<string, any>;
      addDiscriminatorMappings(document);
      return document;
    },
  });

  if (options.exposeUi) {
    await app.register(swaggerUi, { routePrefix: '/docs' });
  }
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // Written once, at the first request: the routes are all known by then.
  let yaml: string | undefined;
  app.get('/openapi.yaml', { schema: { hide: true } }, async (_request, reply) => {
    yaml ??= openApiYaml(app.swagger());
    return reply.type('application/yaml; charset=utf-8').send(yaml);
  });
}

/**
 * The document as YAML that YAML 1.1 and 1.2 parsers read alike. Written for 1.1, every string a
 * 1.1 parser would type is quoted: the aspect ratios (`16:9` is a base-60 integer there), times,
 * `yes`/`no`/`on`/`off`, octal-looking numbers; what 1.2 parsers read is the same document.
 */
export function openApiYaml(document: unknown): string {
  return stringifyYaml(document, { strict: false, version: '1.1' });
}
