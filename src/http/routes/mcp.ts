import { creatingKeyOf } from '../../services/api-keys.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DomainError } from '../../core/errors.js';
import { mcpServerFor } from '../../mcp/server.js';
import type { ImageTools } from '../../mcp/tools.js';

export interface McpRoutesOptions {
  tools: ImageTools;
  /** A JSON-RPC message may carry an image as base64 (upload_reference): the upload limit, encoded. */
  bodyLimit: number;
  /** The creates budget, spent by generate_image (RateLimits.spendCreate). */
  spendCreate: (request: FastifyRequest) => Promise<void>;
  /** RFC 9728 metadata of /mcp, named by every 401 so that an OAuth client can find its way (decision 0034). */
  resourceMetadataUrl: string;
}

/**
 * The remote MCP server (Streamable HTTP, stateless; decision 0026). Authentication, rate limits and
 * the no-store header come from the scope, as for /api/v1; the SDK's transport answers the request
 * itself on the raw response, with the headers those hooks set copied onto it.
 */
export async function mcpRoutes(
  app: FastifyInstance,
  { tools, bodyLimit, spendCreate, resourceMetadataUrl }: McpRoutesOptions,
): Promise<void> {
  // The MCP authorization spec's challenge: where the metadata is, and, when a token was sent, that it was refused.
  app.addHook('onSend', (request, reply, _payload, done) => {
    if (reply.statusCode === 401)
      reply.header(
        'www-authenticate',
        `Bearer resource_metadata="${resourceMetadataUrl}"${request.headers.authorization ? ', error="invalid_token"' : ''}`,
      );
    done();
  });
  const config = { auth: 'bearer-or-access-token' } as const;
  app.post('/mcp', { bodyLimit, config, schema: { hide: true } }, async (request, reply) => {
    const server = mcpServerFor(tools, {
      accountId: request.caller.accountId,
      key: creatingKeyOf(request.caller),
      requestId: String(request.id),
      log: request.log,
      spendCreate: () => spendCreate(request),
    });
    // No session: any API process answers any request, so a client behind a load balancer needs no affinity.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.raw.once('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined) reply.raw.setHeader(name, value);
    keepNoStore(reply.raw);
    reply.hijack();
    await transport.handleRequest(request.raw, reply.raw, request.body);
  });

  // A stateless server has no stream of its own to offer a GET (the Streamable HTTP spec allows 405).
  app.get('/mcp', { config, schema: { hide: true } }, async (_request, reply) => {
    reply.header('allow', 'POST');
    throw new DomainError(
      'method_not_allowed',
      'This MCP server is stateless: send JSON-RPC messages with POST; it opens no server-initiated stream.',
    );
  });
}

/**
 * The transport writes its event streams with Cache-Control: no-cache, which still lets a cache
 * store them; tool results carry signed URLs and account data, so they keep the scope's no-store.
 */
function keepNoStore(raw: ServerResponse): void {
  const writeHead = raw.writeHead.bind(raw) as (...args: unknown[]) => ServerResponse;
  raw.writeHead = ((...args: unknown[]) => {
    const headers = args.find((arg) => typeof arg === 'object' && arg !== null) as Record<string, unknown> | undefined;
    if (headers)
      for (const name of Object.keys(headers)) if (name.toLowerCase() === 'cache-control') delete headers[name];
    raw.setHeader('cache-control', 'no-store');
    return writeHead(...args);
  }) as ServerResponse['writeHead'];
}
