import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { LogController, type FastifyHttpOptions, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { trustProxyOption } from '../config.js';
import { clientErrorHandler, frameworkErrorHandler } from './plugins/errors.js';
import { buildSerializerCompilerFactory } from './serialization.js';
import { buildValidatorCompilerFactory } from './validation.js';

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const JSON_BODY_LIMIT = 1024 * 1024;

/**
 * One info line per request, when it ends. Fastify's default writes two, serialising the request
 * and the reply, which was the largest cost of a request at LOG_LEVEL=info (docs/performance-history.md,
 * "Optimisations"); and it logs the full URL, where a signed media URL carries its signature.
 */
class OneLinePerRequest extends LogController {
  incomingRequest(): void {}

  requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      super.requestCompleted(error, request, reply);
      return;
    }
    request.log.info(
      {
        method: request.method,
        path: request.url.split('?', 1)[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request completed',
    );
  }
}

/** Fastify's own settings for the API: timeouts, body limit, request ids, compilers, one log line per request. */
export function serverOptions(config: Config, logger: boolean | object | undefined): FastifyHttpOptions<Server> {
  return {
    logger: logger ?? { level: config.LOG_LEVEL, redact: ['req.headers.authorization'] },
    bodyLimit: JSON_BODY_LIMIT,
    // No request may hold a connection for ever (fastify's defaults wait without limit): headers
    // and the whole request must arrive in time, and a silent connection is closed.
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    connectionTimeout: config.HTTP_IDLE_TIMEOUT_MS,
    http: {
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
      // Node checks the two timeouts above on this interval (default 30 s), so it bounds how late they fire.
      connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(config.HTTP_HEADERS_TIMEOUT_MS / 4))),
    },
    trustProxy: config.TRUST_PROXY === undefined ? false : trustProxyOption(config.TRUST_PROXY),
    routerOptions: { ignoreTrailingSlash: true },
    // A caller's own request id is kept so that both sides can find the same request in their logs.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
    },
    schemaController: {
      compilersFactory: {
        buildValidator: buildValidatorCompilerFactory(),
        buildSerializer: buildSerializerCompilerFactory(),
      },
    },
    logController: new OneLinePerRequest(),
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  };
}
