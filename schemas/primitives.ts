import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';

/** Response building blocks shared by the resource and webhook schemas. */

export const Timestamp = Type.String({ format: 'date-time' });

/**
 * `schema` or null. A schema of one primitive type becomes `type: [<type>, 'null']`; anything else
 * (an object, a $ref) an `anyOf` with null. Both mean the same in JSON Schema, but
 * fast-json-stringify writes a type list directly, whereas for an `anyOf` it runs a validator on
 * every value to pick the branch (about 9 % of a task list page; BENCHMARKS.md).
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const { type } = schema as { type?: unknown };
  if (typeof type === 'string' && type !== 'object' && type !== 'array') {
    return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] });
  }
  return Type.Unsafe<Static<T> | null>(Type.Union([Type.Null(), schema]));
}
