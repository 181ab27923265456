import type { FastifySchema, FastifyServerOptions } from 'fastify';
import { GenerationRequest } from '../../schemas/catalog.js';
import { bodyAjv, refusingNonFiniteNumbers, textAjv, validateGenerationRequest } from '../contract/validation.js';

type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;
type ValidatorFactoryInput = { schema: FastifySchema; httpPart?: string };

/**
 * fastify's validator compiler over the contract's two Ajv instances (src/contract/validation.ts):
 * bodies exactly as sent, query strings and path parameters coerced from text.
 *
 * @fastify/ajv-compiler's typings describe the compiler as taking a bare schema, but fastify calls
 * it with the route definition ({ schema, httpPart, ... }), which is what this relies on.
 */
export function buildValidatorCompilerFactory(): ValidatorFactory {
  const factory = (externalSchemas: Record<string, unknown>) => {
    const schemas = Object.values(externalSchemas) as object[];
    const bodies = bodyAjv(schemas);
    const texts = textAjv(schemas);
    return ({ schema, httpPart }: ValidatorFactoryInput) => {
      if (httpPart !== 'body') return refusingNonFiniteNumbers(texts.compile(schema as object));
      // The create body is compiled once for every face (the MCP tools check theirs with it too).
      if (schema === GenerationRequest) return validateGenerationRequest();
      return bodies.compile(schema as object);
    };
  };
  return factory as unknown as ValidatorFactory;
}
