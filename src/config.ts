import os from 'node:os';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/**
 * The whole runtime configuration, read only from environment variables (DESIGN 4). One schema
 * validates them at start; a bad value stops the process naming the variable.
 */
const Int = (options: { minimum?: number; maximum?: number; default: number; description: string }) =>
  Type.Integer({ minimum: 0, ...options });
const Bool = (description: string) => Type.Boolean({ default: false, description });

export const ConfigSchema = Type.Object({
  PORT: Int({ maximum: 65535, default: 3000, description: 'Port the API listens on.' }),
  HOST: Type.String({ default: '127.0.0.1', description: 'Interface the API listens on.' }),
  DATA_DIR: Type.String({ default: './data', description: 'Embedded database, blobs and generated secrets.' }),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^(postgres|postgresql)://', description: 'postgres://… selects PostgreSQL; unset = SQLite in DATA_DIR.' })),
  BLOB_STORE: Type.Union([Type.Literal('fs'), Type.Literal('s3')], { default: 'fs', description: 'Object storage adapter.' }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://', description: 'Shared rate-limit counters across processes.' })),
  WORKER_CONCURRENCY: Int({ maximum: 256, default: os.availableParallelism(), description: 'In-process workers of serve; 0 = API only.' }),
  PUBLIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://', description: 'Origin used in result URLs; default http://HOST:PORT.' })),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),
  RATE_LIMIT_CREATES_PER_MIN: Int({ minimum: 1, default: 600, description: 'Creates per minute per key.' }),
  RATE_LIMIT_REQUESTS_PER_MIN: Int({ minimum: 1, default: 3000, description: 'Other requests per minute per key.' }),
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: Int({ minimum: 1, default: 60, description: 'Failed authentications per minute per client address.' }),
  MAX_ACTIVE_TASKS: Int({ minimum: 1, default: 100, description: 'CREATED + IN_PROGRESS tasks one account may have.' }),
  UPLOAD_MAX_BYTES: Int({ minimum: 1, default: 20 * 1024 * 1024, description: 'Largest accepted upload in bytes.' }),
  UPLOAD_MAX_PIXELS: Int({ minimum: 1, default: 40_000_000, description: 'Largest accepted upload in pixels.' }),
  UPLOAD_RETENTION_HOURS: Int({ minimum: 1, default: 7 * 24, description: 'Uploads expire after this many hours.' }),
  RESULT_RETENTION_HOURS: Int({ minimum: 1, default: 30 * 24, description: 'Generated images expire after this many hours.' }),
  SIGNED_URL_TTL_SECONDS: Int({ minimum: 1, default: 3600, description: 'Lifetime of signed download URLs.' }),
  MEDIA_SIGNING_SECRET: Type.Optional(Type.String({ minLength: 32, description: 'HMAC secret for signed URLs; generated into DATA_DIR when unset. Set the same value on every API process of a cluster.' })),
  WEBHOOK_ALLOW_PRIVATE: Bool('Allow http and loopback/private webhook targets (tests, local development).'),
  DEV_ACCOUNT_TOKENS: Int({ default: 1000, description: 'Balance of the development account made on the first start of an empty embedded install.' }),
});

export type Config = Static<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** Validates the environment; unknown variables are ignored (the environment holds many others). */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const known: Record<string, unknown> = {};
  for (const name of Object.keys(ConfigSchema.properties)) {
    const value = env[name];
    if (value !== undefined && value !== '') known[name] = value;
  }
  const candidate = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, known));
  const firstError = Value.Errors(ConfigSchema, candidate).First();
  if (firstError) {
    const variable = firstError.path.replace(/^\//, '');
    throw new ConfigError(`Invalid environment variable ${variable}=${JSON.stringify(env[variable] ?? '')}: ${firstError.message}`);
  }
  return candidate as Config;
}

export function publicBaseUrl(config: Config): string {
  return (config.PUBLIC_BASE_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/+$/, '');
}

export function sqlitePath(config: Config): string {
  return path.join(config.DATA_DIR, 'imagegen.sqlite');
}
