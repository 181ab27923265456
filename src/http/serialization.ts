import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type SerializerFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildSerializer']
>;

/**
 * Fastify compiles a response serializer per route and status, and most of them are the same
 * schema: the problem+json body every route declares for each of its error statuses. Compiling
 * each distinct schema once per app (same schema, same shared schemas: the same serializer, which
 * is a pure function) keeps building an app cheap, which every test does several times.
 */
export function buildSerializerCompilerFactory(): SerializerFactory {
  const selector = SerializerSelector();
  const factory = (externalSchemas: unknown, serializerOptions: unknown) => {
    const compile = selector(externalSchemas as never, serializerOptions as never);
    const compiled = new Map<string, ReturnType<typeof compile>>();
    return (route: Parameters<typeof compile>[0]) => {
      const key = JSON.stringify(route.schema);
      let serializer = compiled.get(key);
      if (!serializer) {
        serializer = compile(route);
        compiled.set(key, serializer);
      }
      return serializer;
    };
  };
  return factory as unknown as SerializerFactory;
}
