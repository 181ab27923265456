import rateLimit from '@fastify/rate-limit';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { StringEnum } from '../../../schemas/model-entry.js';
import { COMMON_HEADERS, NO_SECURITY, problemResponses, RATE_LIMIT_HEADERS } from '../route-schemas.js';
import { HEALTH_CHECKS_PER_MIN_PER_ADDRESS } from './health.js';

export interface RootRoutesOptions {
  /** Whether /playground is served (PLAYGROUND). */
  playground: boolean;
  /** Whether /mcp is served (MCP). */
  mcp: boolean;
}

/** Every link the root can list; those of a part turned off (PLAYGROUND, MCP) are left out. */
const LINKS = [
  { rel: 'docs', href: '/docs', title: 'API reference (Swagger UI): every route, try it with a key' },
  { rel: 'playground', href: '/playground', title: 'Playground: generate images in the browser' },
  { rel: 'openapi-json', href: '/openapi.json', title: 'OpenAPI 3.1 document (JSON)' },
  { rel: 'openapi-yaml', href: '/openapi.yaml', title: 'OpenAPI 3.1 document (YAML)' },
  { rel: 'mcp', href: '/mcp', title: 'MCP server (Streamable HTTP), for agents and Claude' },
  { rel: 'api', href: '/api/v1', title: 'The native API (Bearer API key)' },
  { rel: 'openai', href: '/v1', title: 'The OpenAI Images API face (base URL for the OpenAI SDKs)' },
] as const;
type Link = (typeof LINKS)[number];

const DESCRIPTION = 'Image generation API: tasks priced in tokens, an OpenAI-compatible face and an MCP server.';

const ServiceIndex = Type.Object(
  {
    name: Type.Literal('imagegen'),
    description: Type.Literal(DESCRIPTION),
    links: Type.Array(
      Type.Object(
        {
          rel: StringEnum(
            LINKS.map((link) => link.rel),
            { description: 'What the link is.' },
          ),
          href: StringEnum(
            LINKS.map((link) => link.href),
            { description: 'A path of this service.' },
          ),
          title: StringEnum(LINKS.map((link) => link.title)),
        },
        { additionalProperties: false },
      ),
      { maxItems: LINKS.length },
    ),
  },
  { additionalProperties: false },
);

/**
 * `GET /`: where to go from the service's root. An API client (any Accept that does not prefer
 * HTML, `*\/*` included) gets JSON; a browser, which asks for text/html first, a small page of
 * the same links.
 */
export const rootRoutes: FastifyPluginAsyncTypebox<RootRoutesOptions> = async (app, options) => {
  const links = LINKS.filter(
    (link) => (link.rel !== 'playground' || options.playground) && (link.rel !== 'mcp' || options.mcp),
  );
  const page = indexPage(DESCRIPTION, links);
  // It needs no key, so it is limited per client address, as the health checks are.
  await app.register(rateLimit, { max: HEALTH_CHECKS_PER_MIN_PER_ADDRESS, timeWindow: 60_000, enableDraftSpec: true });

  app.get(
    '/',
    {
      schema: {
        operationId: 'serviceIndex',
        tags: ['operations'],
        summary: 'Where to go: docs, playground, OpenAPI document, MCP',
        description:
          'JSON for API clients; a small HTML page of the same links when the Accept header prefers `text/html` (a browser). Needs no key.',
        security: NO_SECURITY,
        response: {
          200: {
            description: 'The links of the service.',
            headers: {
              ...COMMON_HEADERS,
              ...RATE_LIMIT_HEADERS,
              Vary: { type: 'string', enum: ['Accept'], description: 'The answer depends on Accept.' },
            },
            content: {
              'application/json': { schema: ServiceIndex },
              'text/html': {
                schema: Type.String({
                  maxLength: 10_000,
                  pattern: '^<!doctype html>',
                  description: 'The same links as a page.',
                }),
              },
            },
          },
          ...problemResponses(['rate_limited', 'internal_error']),
        },
      },
    },
    async (request, reply) => {
      reply.header('vary', 'Accept');
      if (prefersHtml(request.headers.accept)) return reply.type('text/html; charset=utf-8').send(page);
      return reply
        .type('application/json; charset=utf-8')
        .send({ name: 'imagegen' as const, description: DESCRIPTION, links });
    },
  );
};

/**
 * Whether an Accept header prefers an HTML page to JSON: text/html (or XHTML) named with a
 * weight above zero and above that of application/json. Wildcards prefer neither, so `*\/*`
 * (curl, most HTTP libraries) and a missing header get JSON.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  let html = 0;
  let json = 0;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = params.find((param) => param.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!Number.isFinite(weight)) continue;
    if (type === 'text/html' || type === 'application/xhtml+xml') html = Math.max(html, weight);
    else if (type === 'application/json') json = Math.max(json, weight);
  }
  return html > 0 && html > json;
}

function indexPage(description: string, links: readonly Link[]): string {
  const items = links
    .map((link) => `<li><a href="${link.href}">${link.href}</a> — ${escapeHtml(link.title)}</li>`)
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>imagegen</title></head>
<body>
<h1>imagegen</h1>
<p>${escapeHtml(description)}</p>
<ul>
${items}
</ul>
</body>
</html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.codePointAt(0)};`);
}
