import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { PROBLEM_CONTENT_TYPE, problemBody } from '../contract/problems.js';

/**
 * Who may read /metrics (docs/design.md §3.8): with a token, requests that send `Authorization: Bearer
 * <token>` (Prometheus' `authorization` setting), from anywhere; without one, loopback clients only.
 * The metrics name routes, error counts and memory: not for whoever reaches the port. Both the API
 * and a worker process guard their /metrics with it (an onRequest hook of the route).
 */
export function metricsAccess(token: string | undefined) {
  const expected = token === undefined ? null : Buffer.from(`Bearer ${token}`);
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (expected) {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length === expected.length && timingSafeEqual(given, expected)) return;
      reply.header('www-authenticate', 'Bearer');
      await refuse(request, reply, 'unauthorized', 'Send Authorization: Bearer <METRICS_TOKEN>.');
      return;
    }
    // request.ip is the client X-Forwarded-For names when the proxy is trusted (TRUST_PROXY).
    if (isLoopback(request.ip)) return;
    // Without a token the route is not there for anyone else.
    await refuse(request, reply, 'not_found', `No route for ${request.method} /metrics.`);
  };
}

function isLoopback(address: string): boolean {
  return ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';
}

function refuse(request: FastifyRequest, reply: FastifyReply, code: 'unauthorized' | 'not_found', detail: string) {
  const body = problemBody(code, detail, String(request.id));
  return reply.code(body.status).type(PROBLEM_CONTENT_TYPE).send(body);
}
