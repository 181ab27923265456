import type { FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { DomainError } from '../core/errors.js';
import { escapePointer } from '../contract/problems.js';

/**
 * The parser of JSON bodies: fastify's own (secure-json-parse, refusing keys that could poison
 * prototypes), except in what it says when it refuses. Fastify's reports every refusal as a body
 * that is not valid JSON, and a body with a `__proto__` key is valid JSON: its client is told
 * instead which key no request accepts, and where (docs/design.md §3.7: a pointer to the field).
 */
export function parseJsonBody(
  _request: FastifyRequest,
  bytes: Buffer,
  done: (error: Error | null, value?: unknown) => void,
): void {
  if (bytes.length === 0) {
    done(
      new DomainError(
        'invalid_json',
        'The body is empty, but its Content-Type says JSON: send a JSON body, or no Content-Type.',
      ),
    );
    return;
  }
  let body: string;
  try {
    // JSON is UTF-8 (RFC 8259 8.1): bytes that are not are refused, not replaced with U+FFFD and
    // stored (or charged for) as something the client never sent.
    body = STRICT_UTF8.decode(bytes);
  } catch {
    done(new DomainError('invalid_json', 'The body is not valid UTF-8; JSON must be.'));
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
  const forbidden = value === null ? firstPointer(JSON.parse(body), isForbiddenKey) : null;
  if (forbidden !== null) {
    const detail = 'A key named "__proto__" (or "constructor" holding "prototype") is not a field of any request.';
    done(
      new DomainError('invalid_request', `body ${forbidden}: ${detail}`, [
        { pointer: forbidden, location: 'body', code: 'forbidden_key', detail },
      ]),
    );
    return;
  }
  // UTF-8 bytes cannot hold a lone UTF-16 surrogate, but a JSON escape (\ud800) can: such a
  // string is not text, and no store keeps it as sent. Looked for only where an escape names one.
  const notText = SURROGATE_ESCAPE.test(body) ? firstPointer(value, isNotText) : null;
  if (notText !== null) {
    const detail = 'Must be text: a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape) has no UTF-8 form.';
    done(
      new DomainError('invalid_request', `body ${notText || '(root)'}: ${detail}`, [
        { pointer: notText, location: 'body', code: 'invalid_format', detail },
      ]),
    );
    return;
  }
  done(null, value);
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

const isForbiddenKey = (key: string, value: unknown) =>
  key === '__proto__' ||
  (key === 'constructor' && value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype'));

const isNotText = (key: string, value: unknown) =>
  !key.isWellFormed() || (typeof value === 'string' && !value.isWellFormed());

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * The JSON Pointer of the first member or item that `refused` names (the keys secure-json-parse
 * refuses, in a value parsed without it; strings that are not text), depth first. Walked
 * with an explicit stack, not recursion: a body nested thousands of levels deep (well within the
 * body limit) would otherwise overflow the call stack and end as a 500. Each entry links to its
 * parent, and the pointer is spelled out only for the key found, so the walk stays linear in the
 * body's size however deep it goes.
 */
function firstPointer(root: unknown, refused: (key: string, value: unknown) => boolean): string | null {
  interface Visit {
    value: unknown;
    key: string;
    parent: Visit | null;
  }
  const pointerOf = (visit: Visit) => {
    const segments: string[] = [];
    for (let at: Visit | null = visit; at?.parent; at = at.parent) segments.push(escapePointer(at.key));
    return segments.length === 0 ? '' : `/${segments.reverse().join('/')}`;
  };
  const top: Visit = { value: root, key: '', parent: null };
  if (typeof root === 'string' && refused('', root)) return pointerOf(top);
  const pending: Visit[] = [top];
  for (let visit = pending.pop(); visit; visit = pending.pop()) {
    if (visit.value === null || typeof visit.value !== 'object') continue;
    const children = Object.entries(visit.value).map(([key, value]): Visit => ({ value, key, parent: visit }));
    for (const child of children) if (refused(child.key, child.value)) return pointerOf(child);
    // Reversed onto the stack so that the first key's subtree is searched first, as before.
    for (let i = children.length - 1; i >= 0; i--) pending.push(children[i]);
  }
  return null;
}
