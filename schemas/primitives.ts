import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';

/**
 * Response building blocks shared by the resource and webhook schemas. Every string, array and
 * integer carries bounds, so that generated clients and API linters (OWASP API4) know the limits.
 */

/** RFC 3339 as `Date.toISOString()` writes it (27 characters for years past 9999). */
export const Timestamp = Type.String({ format: 'date-time', maxLength: 32 });

/** Pattern of a UUID (any version), in either case: UUIDs are case-insensitive (RFC 9562). */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const UUID_LENGTH = 36;

/** An id this API issues: a UUIDv7, written in lowercase. */
export const Uuid = (description: string) =>
  Type.String({ format: 'uuid', minLength: UUID_LENGTH, maxLength: UUID_LENGTH, description });

/** An id a client sends: a UUID in either case; the API treats it as its lowercase spelling. */
export const UuidInput = (description: string, options: Record<string, unknown> = {}) =>
  Type.String({ pattern: UUID_PATTERN, minLength: UUID_LENGTH, maxLength: UUID_LENGTH, description, ...options });

/** An example id for documentation: the shape of an id, never one that exists. */
export const EXAMPLE_MEDIA_ID = '01937f4c-9a2b-7c3d-8e4f-a0b1c2d3e4f5';
export const EXAMPLE_TASK_ID = '01937f4d-1e2f-7a3b-9c4d-e5f6a7b8c9d0';

/** Opaque page cursors: base64url of a keyset position. */
export const CURSOR_MAX_LENGTH = 200;
export const Cursor = (description: string) =>
  Type.String({ minLength: 1, maxLength: CURSOR_MAX_LENGTH, pattern: '^[A-Za-z0-9_-]+$', description });

/** A count of tokens: whole, never negative, and exact in a JavaScript number. */
export const TokenAmount = (options: { minimum?: number; description?: string } = {}) =>
  Type.Integer({ format: 'int64', minimum: options.minimum ?? 0, maximum: Number.MAX_SAFE_INTEGER, ...options });

/** A bounded 32-bit count (pixels, page sizes, durations in ms). */
export const Int32 = (options: { minimum?: number; maximum?: number; default?: number; description?: string } = {}) =>
  Type.Integer({ format: 'int32', minimum: 0, maximum: 2_147_483_647, ...options });

/** An absolute URL this API wrote or was given. */
export const UrlString = (maxLength: number, description?: string) =>
  Type.String({ format: 'uri', maxLength, ...(description ? { description } : {}) });

/**
 * `schema` or null. A schema of one primitive type becomes `type: [<type>, 'null']`; anything else
 * (an object, a $ref) an `anyOf` with null. Both mean the same in JSON Schema, but
 * fast-json-stringify writes a type list directly, whereas for an `anyOf` it runs a validator on
 * every value to pick the branch (about 9 % of a task list page; docs/performance-history.md).
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const { type } = schema as { type?: unknown };
  if (typeof type === 'string' && type !== 'object' && type !== 'array') {
    return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] });
  }
  return Type.Unsafe<Static<T> | null>(Type.Union([Type.Null(), schema]));
}
