import type { FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { DomainError } from '../core/errors.js';
import { escapePointer } from './problem.js';

/**
 * The parser of JSON bodies: fastify's own (secure-json-parse, refusing keys that could poison
 * prototypes), except in what it says when it refuses. Fastify's reports every refusal as a body
 * that is not valid JSON, and a body with a `__proto__` key is valid JSON: its client is told
 * instead which key no request accepts, and where (DESIGN 3.7: a pointer to the field).
 */
export function parseJsonBody(_request: FastifyRequest, body: string, done: (error: Error | null, value?: unknown) => void): void {
  if (body.length === 0) {
    done(new DomainError('invalid_json', 'The body is empty, but its Content-Type says JSON: send a JSON body, or no Content-Type.'));
    return;
  }
  let value: unknown;
  try {
    // safe: a forbidden key gives null instead of an error that looks like a syntax error.
    value = secureJson.parse(body, undefined, { protoAction: 'error', constructorAction: 'error', safe: true });
  } catch {
    done(new DomainError('invalid_json', 'The body is not valid JSON.'));
    return;
  }
  const forbidden = value === null ? forbiddenKeyPointer(JSON.parse(body)) : null;
  if (forbidden !== null) {
    const detail = 'A key named "__proto__" (or "constructor" holding "prototype") is not a field of any request.';
    done(new DomainError('invalid_request', `body ${forbidden}: ${detail}`, [{ pointer: forbidden, location: 'body', code: 'forbidden_key', detail }]));
    return;
  }
  done(null, value);
}

/** The JSON Pointer of the first key secure-json-parse refuses, in a value parsed without it. */
function forbiddenKeyPointer(value: unknown, at = ''): string | null {
  if (value === null || typeof value !== 'object') return null;
  for (const [key, child] of Object.entries(value)) {
    const pointer = `${at}/${escapePointer(key)}`;
    if (key === '__proto__') return pointer;
    if (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype')) return pointer;
    const nested = forbiddenKeyPointer(child, pointer);
    if (nested !== null) return nested;
  }
  return null;
}
