import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * The headers helmet sets for `options`, worked out once. Helmet's middleware is pure in its
 * options (no nonces are used here), but called per request, as @fastify/helmet does, it parsed
 * the CSP directives and ran a dozen middlewares and two async hooks on every answer: 7 % of a
 * create's CPU (docs/performance-history.md, "Where the request path's time went"). A route that needs its own
 * policy sets the header itself, which replaces this one (the Playground does).
 */
export function helmetHeaders(options: Readonly<HelmetOptions>): Readonly<Record<string, string>> {
  const headers: Record<string, string> = {};
  const recorder = {
    setHeader(name: string, value: string | number) {
      headers[name.toLowerCase()] = String(value);
    },
    removeHeader(name: string) {
      delete headers[name.toLowerCase()];
    },
  };
  helmet(options)({} as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => {
    if (error) throw error;
  });
  return Object.freeze(headers);
}
