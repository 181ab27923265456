import os from 'node:os';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import ipaddr from 'ipaddr.js';
import { MODEL_MODULES } from '../schemas/models/index.js';
import { assertValidBlobKey } from './blobs/port.js';
import { openAiModelFamily, openAiQualities, parseOpenAiImageSizes } from './core/size-plan.js';

/**
 * The whole runtime configuration, read only from environment variables (docs/design.md §4). One schema
 * validates them at start; a bad value stops the process naming the variable.
 */
/** `defaultText`: a default that differs from machine to machine, as docs/configuration.md names it. */
const Int = (options: {
  minimum?: number;
  maximum?: number;
  default: number;
  defaultText?: string;
  description: string;
}) => Type.Integer({ minimum: 0, ...options });
const Bool = (description: string) => Type.Boolean({ default: false, description });

export const GENERATOR_BACKENDS = ['local', 'gemini', 'openai'] as const;
export type GeneratorBackend = (typeof GENERATOR_BACKENDS)[number];
const Backend = (model: string) =>
  Type.Union(
    GENERATOR_BACKENDS.map((b) => Type.Literal(b)),
    {
      default: 'local',
      description: `Which generator serves ${model}: local (the preview renderer), gemini or openai.`,
    },
  );

/** The service's own variables: listening, storage, limits, timeouts, media, tasks, webhooks. */
const SERVICE_VARIABLES = {
  PORT: Int({ maximum: 65535, default: 3000, description: 'Port the API listens on.' }),
  WORKER_METRICS_PORT: Int({
    maximum: 65535,
    default: 9464,
    description:
      'Port on HOST where a `worker` process serves /metrics, /healthz and /readyz (serve and api use PORT); 0 = none.',
  }),
  HOST: Type.String({ default: '127.0.0.1', description: 'Interface the API listens on.' }),
  TRUST_PROXY: Type.Optional(
    Type.String({
      description:
        "Reverse proxies whose X-Forwarded-For names the client (for per-address limits and logs): comma-separated addresses or CIDR ranges (also loopback, linklocal, uniquelocal). Unset = the connection's address is the client, so behind a proxy every client shares one failed-authentication budget.",
    }),
  ),
  DATA_DIR: Type.String({ default: './data', description: 'Embedded database, blobs and generated secrets.' }),
  DATABASE_URL: Type.Optional(
    Type.String({
      pattern: '^(postgres|postgresql)://',
      description:
        'postgres://… selects PostgreSQL; unset = SQLite in DATA_DIR. A ?options=-c%20search_path%3DNAME query puts the tables in schema NAME.',
    }),
  ),
  DATABASE_POOL_SIZE: Int({
    minimum: 1,
    maximum: 1000,
    default: 10,
    description: 'PostgreSQL connections per process (each concurrent transaction holds one).',
  }),
  BLOB_STORE: Type.Union([Type.Literal('fs'), Type.Literal('s3')], {
    default: 'fs',
    description: 'Object storage adapter: fs (files under DATA_DIR) or s3 (S3 or an S3-compatible store).',
  }),
  S3_BUCKET: Type.Optional(
    Type.String({
      minLength: 3,
      maxLength: 63,
      pattern: '^[a-z0-9][a-z0-9.-]+[a-z0-9]$',
      description: 'Bucket of the blobs; required with BLOB_STORE=s3. It must exist (it is never created).',
    }),
  ),
  S3_REGION: Type.Optional(
    Type.String({
      minLength: 1,
      pattern: '^[a-z0-9-]+$',
      description: "The bucket's region; required with BLOB_STORE=s3 (auto for Cloudflare R2).",
    }),
  ),
  S3_ENDPOINT: Type.Optional(
    Type.String({
      pattern: '^https?://[^/?#\\s]+/?$',
      description: 'Origin of an S3-compatible store (R2, MinIO, Ceph, SeaweedFS, Garage); unset = AWS S3.',
    }),
  ),
  S3_FORCE_PATH_STYLE: Bool('Address the bucket in the path (/bucket/key), as most S3-compatible stores want.'),
  S3_PREFIX: Type.String({
    default: '',
    maxLength: 200,
    description: 'Prefix of every object key (e.g. imagegen/), so that one bucket can hold other data too.',
  }),
  S3_PRESIGNED_DOWNLOADS: Bool(
    'Media content answers 302 to a short-lived S3 presigned GET instead of streaming the bytes through the API.',
  ),
  S3_PRESIGNED_URL_TTL_SECONDS: Int({
    minimum: 1,
    maximum: 7 * 24 * 3600,
    default: 300,
    description: 'Lifetime of the S3 presigned URLs of S3_PRESIGNED_DOWNLOADS (never beyond the media or signed URL).',
  }),
  REDIS_URL: Type.Optional(
    Type.String({ pattern: '^rediss?://', description: 'Shared rate-limit counters across processes.' }),
  ),
  REDIS_KEY_PREFIX: Type.String({
    default: 'imagegen:',
    maxLength: 100,
    description: 'Prefix of every Redis key this service writes (several deployments can share one Redis).',
  }),
  WORKER_CONCURRENCY: Int({
    maximum: 256,
    default: os.availableParallelism(),
    defaultText: 'the number of cores',
    description:
      'Local renderer tasks run at once per process (it is CPU-bound); 0 = serve runs the API only. Remote backends are limited by <BACKEND>_MAX_CONCURRENCY and their adaptive limit instead.',
  }),
  PUBLIC_BASE_URL: Type.Optional(
    Type.String({ pattern: '^https?://', description: 'Origin used in result URLs; default http://HOST:PORT.' }),
  ),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  RATE_LIMIT_CREATES_PER_MIN: Int({ minimum: 1, default: 600, description: 'Creates per minute per key.' }),
  RATE_LIMIT_REQUESTS_PER_MIN: Int({ minimum: 1, default: 3000, description: 'Other requests per minute per key.' }),
  RATE_LIMIT_OAUTH_PER_MIN: Int({
    minimum: 1,
    default: 10,
    description:
      'OAuth client registrations and consent submissions (/oauth/register, POST /oauth/authorize) per minute per client address.',
  }),
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: Int({
    minimum: 1,
    default: 60,
    description:
      'Failed authentications per minute per client address; past it further failures get 429, a valid key is still served.',
  }),
  MAX_ACTIVE_TASKS: Int({ minimum: 1, default: 100, description: 'CREATED + IN_PROGRESS tasks one account may have.' }),
  UPLOAD_MAX_BYTES: Int({ minimum: 1, default: 20 * 1024 * 1024, description: 'Largest accepted upload in bytes.' }),
  UPLOAD_MAX_PIXELS: Int({ minimum: 1, default: 40_000_000, description: 'Largest accepted upload in pixels.' }),
  UPLOAD_RETENTION_HOURS: Int({ minimum: 1, default: 7 * 24, description: 'Uploads expire after this many hours.' }),
  UPLOAD_IDLE_TIMEOUT_MS: Int({
    minimum: 100,
    default: 30_000,
    description:
      'An upload body that sends no byte for this long is abandoned: its connection is closed and its spool file removed.',
  }),
  UPLOAD_MAX_IN_FLIGHT: Int({
    minimum: 1,
    default: 64,
    description:
      'Uploads received or processed at once per API process; more get 503 with Retry-After, refused before the body is read.',
  }),
  UPLOAD_MAX_IN_FLIGHT_PER_KEY: Int({
    minimum: 1,
    default: 10,
    description:
      'Uploads in flight at once per API key and process; more get 429 with Retry-After, refused before the body is read.',
  }),
  SSE_MAX_STREAMS_PER_KEY: Int({
    minimum: 1,
    default: 100,
    description:
      'Task event streams open at once per API key (or, through signed URLs, per account) and process; more get 429 too_many_streams.',
  }),
  PLAYGROUND: Type.Boolean({
    default: true,
    description: 'Serve the Playground page at /playground (serve and api); false = no page.',
  }),
  CONSOLE: Type.Boolean({
    default: true,
    description:
      'Serve the operators’ console at /console (serve and api): admin-key sign-in, usage charts, accounts, keys, audit log; false = no page.',
  }),
  MCP: Type.Boolean({
    default: true,
    description: 'Serve the remote MCP server (Streamable HTTP) at /mcp (serve and api); false = no /mcp.',
  }),
  SSE_HEARTBEAT_MS: Int({
    minimum: 100,
    default: 15_000,
    description: 'A task event stream sends a comment this often, so proxies and the idle timeout keep it open.',
  }),
  HTTP_HEADERS_TIMEOUT_MS: Int({
    minimum: 100,
    default: 20_000,
    description: 'A connection that has not sent a whole request line and headers within this long is closed (408).',
  }),
  HTTP_REQUEST_TIMEOUT_MS: Int({
    minimum: 100,
    default: 300_000,
    description: 'A request whose body has not been received completely within this long is closed (408).',
  }),
  HTTP_IDLE_TIMEOUT_MS: Int({
    minimum: 100,
    default: 90_000,
    description: 'A connection with no traffic either way for this long is closed; above the 60 s long-poll.',
  }),
  UPLOAD_DECODE_CONCURRENCY: Int({
    minimum: 1,
    maximum: 64,
    default: 2,
    description:
      'Uploads decoded and re-encoded at once per process (each uses about its own size in memory); more wait their turn.',
  }),
  READY_MIN_FREE_MB: Int({
    minimum: 0,
    maximum: 1_048_576,
    default: 256,
    description:
      '/readyz answers 503 (disk failing) while DATA_DIR (database, files, upload spool) has less free space than this.',
  }),
  RESULT_RETENTION_HOURS: Int({
    minimum: 1,
    default: 30 * 24,
    description: 'Generated images expire after this many hours.',
  }),
  SIGNED_URL_TTL_SECONDS: Int({ minimum: 1, default: 3600, description: 'Lifetime of signed download URLs.' }),
  MEDIA_SIGNING_SECRET: Type.Optional(
    Type.String({
      minLength: 32,
      description:
        'HMAC secret for signed URLs; when unset: generated into DATA_DIR/secrets (SQLite), or kept in the database and shared by every process (PostgreSQL).',
    }),
  ),
  WEBHOOK_TIMEOUT_MS: Int({
    minimum: 100,
    maximum: 60_000,
    default: 15_000,
    description: 'A webhook attempt without a response by then has failed.',
  }),
  WEBHOOK_RETRY_SCALE: Type.Number({
    exclusiveMinimum: 0,
    maximum: 1,
    default: 1,
    description: 'Multiplies the webhook retry schedule (tests shrink it).',
  }),
  WEBHOOK_CONCURRENCY: Int({
    minimum: 1,
    maximum: 256,
    default: 4,
    description: 'Webhook attempts in flight at once per worker process.',
  }),
  HOUSEKEEPING_INTERVAL_MS: Int({
    minimum: 100,
    default: 60_000,
    description: 'How often expired media and idempotency keys are swept.',
  }),
  WEBHOOK_ALLOW_PRIVATE: Bool('Allow http and loopback/private webhook targets (tests, local development).'),
  WEBHOOK_MANUAL_RETRIES_PER_HOUR: Int({
    minimum: 1,
    default: 10,
    description:
      'Manual replays (POST …/retry) of one webhook delivery per sliding hour; one at a time per delivery (429 retry_in_progress, or retry_budget_exhausted with Retry-After).',
  }),
  WEBHOOK_MANUAL_RETRIES_PER_ACCOUNT_PER_HOUR: Int({
    minimum: 1,
    default: 100,
    description:
      "Manual replays of all of one account's webhook deliveries per sliding hour (429 retry_budget_exhausted with Retry-After).",
  }),
  WEBHOOK_ALLOWED_PORTS: Type.String({
    default: '80,443,1024-65535',
    pattern: '^\\s*\\d{1,5}(\\s*-\\s*\\d{1,5})?(\\s*,\\s*\\d{1,5}(\\s*-\\s*\\d{1,5})?)*\\s*$',
    description:
      'Ports a webhook_url may name: comma-separated ports and low-high ranges. A webhook_url is read once (WHATWG), refused with userinfo, whitespace, backslashes or a host or port written in a form it must rewrite, and stored as its normalised href.',
  }),
  ADMIN_API_KEY: Type.Optional(
    Type.String({
      minLength: 32,
      description:
        'An admin key for /admin/v1 (containers), besides those of `imagegen admin-keys create`; kept in memory as its hash only. A secret.',
    }),
  ),
  METRICS_TOKEN: Type.Optional(
    Type.String({
      minLength: 16,
      description: '/metrics answers only Authorization: Bearer <this>; unset, loopback clients only.',
    }),
  ),
  TASK_LEASE_MS: Int({
    minimum: 100,
    default: 30_000,
    description: "How long a claimed task is a worker's before another may take it over; renewed while it runs.",
  }),
  TASK_MAX_ATTEMPTS: Int({
    minimum: 1,
    default: 3,
    description: 'Claims a task may use (transient failures and lost workers) before it fails and is refunded.',
  }),
  TASK_DEADLINE_MS: Int({
    minimum: 1000,
    default: 15 * 60_000,
    description: 'A task not finished this long after creation fails and is refunded.',
  }),
  GENERATION_TIMEOUT_MS: Int({
    minimum: 100,
    default: 120_000,
    description: 'One generation attempt is aborted after this long (a transient failure).',
  }),
  GENERATION_RETRY_BASE_MS: Int({
    minimum: 1,
    default: 2_000,
    description: 'First backoff before retrying a transient generation failure.',
  }),
  WORKER_POLL_MS: Int({
    minimum: 10,
    default: 500,
    description:
      'How often an idle worker looks for work made by other processes (on PostgreSQL a fallback: workers are woken by LISTEN/NOTIFY).',
  }),
  LONG_POLL_FALLBACK_MS: Int({
    minimum: 10,
    default: 1000,
    description:
      'How often the tasks that long-polls and event streams wait on are checked, in one read for all, for a change no signal of this process carried (SQLite: changes made by other processes).',
  }),
  OPENAI_COMPAT_WAIT_SECONDS: Int({
    minimum: 1,
    maximum: 3600,
    default: 300,
    description:
      'How long a /v1/images request (the OpenAI face) waits for its images; past it, 504 generation_timeout names the tasks, which go on.',
  }),
  SHUTDOWN_GRACE_MS: Int({
    default: 20_000,
    description:
      'On SIGTERM or SIGINT, the drain: the process exits within this long. Running tasks may finish until shortly before (a tenth of it, at most 2 s, is kept to release the rest to other workers); requests in flight past it are cut. An orchestrator must wait longer before it kills (Kubernetes terminationGracePeriodSeconds).',
  }),
  SHUTDOWN_DELAY_MS: Int({
    default: 0,
    description:
      'On SIGTERM, how long an API process goes on serving after /readyz turned 503, for load balancers to take it out of rotation (the image: 2000; its Kubernetes base: 5000); then it stops accepting and answers its long-polls and event streams. SIGINT does not wait. At most half of SHUTDOWN_GRACE_MS is used.',
  }),
  DEV_ACCOUNT_TOKENS: Int({
    default: 1000,
    description: 'Balance of the development account made on the first start of an empty embedded install.',
  }),
};

/** The providers the remote backends call, shared by every model they serve. */
const PROVIDER_VARIABLES = {
  GEMINI_API_KEY: Type.Optional(
    Type.String({ minLength: 1, description: 'Gemini API key; required when a model is served by gemini.' }),
  ),
  GEMINI_VERTEX_PROJECT: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      description:
        'Google Cloud project: when set, gemini calls go to Vertex AI (not the Gemini API), authenticated by Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, or the metadata server); GEMINI_API_KEY is then not needed (docs/models-and-backends.md, "Connect a model").',
    }),
  ),
  GEMINI_VERTEX_LOCATION: Type.String({
    minLength: 1,
    maxLength: 64,
    default: 'global',
    description: 'Vertex AI location of the gemini calls when GEMINI_VERTEX_PROJECT is set.',
  }),
  GEMINI_BASE_URL: Type.Optional(
    Type.String({
      pattern: '^https?://',
      description: "Gemini API base URL (the SDK's httpOptions.baseUrl); unset = Google's.",
    }),
  ),
  GEMINI_MODEL: Type.String({
    minLength: 1,
    default: 'gemini-3-pro-image-preview',
    description: 'Gemini model that serves the models on gemini.',
  }),
  GEMINI_MAX_CONCURRENCY: Int({
    minimum: 1,
    maximum: 1024,
    default: 64,
    description:
      'Most Gemini calls in flight at once, for the whole cluster: a ceiling; the working limit adapts below it (docs/capacity.md, "Capacity").',
  }),
  OPENAI_API_KEY: Type.Optional(
    Type.String({
      minLength: 1,
      description: 'API key of the OpenAI-compatible images API; required when a model is served by openai.',
    }),
  ),
  OPENAI_BASE_URL: Type.Optional(
    Type.String({
      pattern: '^https?://',
      description: "Base URL of the OpenAI-compatible API (the SDK's baseURL, with its /v1); unset = api.openai.com.",
    }),
  ),
  OPENAI_IMAGE_MODEL: Type.Optional(
    Type.String({
      minLength: 1,
      description: 'Image model of the OpenAI-compatible API; required when a model is served by openai.',
    }),
  ),
  OPENAI_MAX_CONCURRENCY: Int({
    minimum: 1,
    maximum: 1024,
    default: 64,
    description:
      'Most OpenAI-compatible calls in flight at once, for the whole cluster: a ceiling; the working limit adapts below it (docs/capacity.md, "Capacity").',
  }),
  OPENAI_IMAGE_SIZES: Type.Optional(
    Type.String({
      description:
        'Sizes the OpenAI-compatible model accepts: exact (any WIDTHxHEIGHT) or comma-separated WIDTHxHEIGHT; unset = by OPENAI_IMAGE_MODEL (docs/models-and-backends.md, "Connect a model").',
    }),
  ),
  BACKEND_UNAVAILABLE_COOLDOWN_MS: Int({
    minimum: 100,
    maximum: 86_400_000,
    default: 60_000,
    description:
      'How long a model backend found unavailable (bad key, billing, region, exhausted quota) refuses creates for its models (503 with Retry-After) before one probe call (docs/models-and-backends.md, "Connect a model").',
  }),
  MAX_UPSCALE: Type.Number({
    minimum: 1,
    maximum: 16,
    default: 2,
    description:
      'Largest linear factor by which a model reply is enlarged to the catalog size; a resolution that would need more is refused at creation (422 resolution_unavailable, nothing charged) where the size plan knows it, else the task fails upscale_exceeded, refunded (docs/models-and-backends.md, "Connect a model").',
  }),
  OPENAI_API_KEY_HEADER: Type.Optional(
    Type.Union([Type.Literal('authorization'), Type.Literal('api-key')], {
      description:
        'How OPENAI_API_KEY is sent: authorization (Bearer, OpenAI and most compatible providers) or api-key (Azure OpenAI); unset = api-key when OPENAI_BASE_URL is an Azure OpenAI host, else authorization (docs/models-and-backends.md, "Connect a model").',
    }),
  ),
  OPENAI_RESULT_URL_ALLOW_PRIVATE: Bool(
    "Allow http and loopback/private result URLs in an OpenAI-compatible reply (tests, a provider on a private network); the API's own origin is always allowed.",
  ),
  OPENAI_IMAGE_QUALITY: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 16,
      description:
        '`quality` sent to the OpenAI model: low, medium, high or auto for the GPT image models; standard or hd for dall-e-3 (dall-e-2: standard); a compatible provider\'s model takes none; another value stops the start, naming the variable. Unset = not sent, the model\'s default (docs/models-and-backends.md, "Connect a model").',
    }),
  ),
  OPENAI_MODEL_FAMILY: Type.Optional(
    Type.Union([Type.Literal('gpt-image'), Type.Literal('dall-e'), Type.Literal('other')], {
      description:
        'Which parameters the OpenAI-compatible model takes, when its name does not say (an Azure deployment): gpt-image (no response_format, the GPT image sizes), dall-e or other; unset = by OPENAI_IMAGE_MODEL (docs/models-and-backends.md, "Connect a model").',
    }),
  ),
};

type ModelModuleOfList = (typeof MODEL_MODULES)[number];
type BackendVariable = ModelModuleOfList['configuration']['backendVariable'];
type UpstreamModelVariable = ModelModuleOfList['configuration']['upstreamModelVariable'];

const UpstreamModel = (model: string) =>
  Type.Optional(
    Type.String({
      minLength: 1,
      description: `The provider's model that serves ${model}; unset = the backend's (GEMINI_MODEL or OPENAI_IMAGE_MODEL). For models on one backend that should use different provider models; the sizes and parameters follow the one named.`,
    }),
  );

/**
 * Each model's variables, named by its module (`ALPHA_PRO_BACKEND`, `ALPHA_PRO_UPSTREAM_MODEL`):
 * every backend variable, then every upstream model variable, in the order of the model list.
 */
function modelVariables() {
  const backends = Object.fromEntries(
    MODEL_MODULES.map((m) => [m.configuration.backendVariable, Backend(m.entry.id)]),
  ) as Record<BackendVariable, ReturnType<typeof Backend>>;
  const upstreamModels = Object.fromEntries(
    MODEL_MODULES.map((m) => [m.configuration.upstreamModelVariable, UpstreamModel(m.entry.id)]),
  ) as Record<UpstreamModelVariable, ReturnType<typeof UpstreamModel>>;
  return { ...backends, ...upstreamModels };
}

export const ConfigSchema = Type.Object({ ...SERVICE_VARIABLES, ...modelVariables(), ...PROVIDER_VARIABLES });

export type Config = Static<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** https to any host, or http to loopback: where a provider's API key may be sent. */
function baseUrlKeepsKeySafe(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol === 'https:') return true;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return url.protocol === 'http:' && (host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host));
}

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
    throw new ConfigError(
      `Invalid environment variable ${variable}=${JSON.stringify(env[variable] ?? '')}: ${firstError.message}`,
    );
  }
  const config = candidate as Config;
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `Invalid environment variable HTTP_HEADERS_TIMEOUT_MS=${config.HTTP_HEADERS_TIMEOUT_MS}: it must not exceed HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS}), which includes the headers`,
    );
  }
  if (config.TRUST_PROXY !== undefined) trustProxyOption(config.TRUST_PROXY); // refuses a bad value at start
  for (const variable of ['GEMINI_BASE_URL', 'OPENAI_BASE_URL'] as const) {
    const value = config[variable];
    // The API key travels in every request: in clear text only to this machine.
    if (value !== undefined && !baseUrlKeepsKeySafe(value)) {
      throw new ConfigError(
        `Invalid environment variable ${variable}=${JSON.stringify(value)}: http:// is allowed to a loopback host only (127.0.0.0/8, ::1, localhost); use https://`,
      );
    }
  }
  if (config.OPENAI_IMAGE_SIZES !== undefined) {
    try {
      parseOpenAiImageSizes(config.OPENAI_IMAGE_SIZES);
    } catch (error) {
      throw new ConfigError(
        `Invalid environment variable OPENAI_IMAGE_SIZES=${JSON.stringify(config.OPENAI_IMAGE_SIZES)}: ${(error as Error).message}`,
      );
    }
  }
  checkBackendSettings(config);
  checkOpenAiQuality(config);
  checkBlobStoreSettings(config);
  return config;
}

/** Azure OpenAI's hosts (its v1 endpoint is https://<resource>.openai.azure.com/openai/v1/), which take the key as `api-key`. */
const AZURE_OPENAI_HOST = /\.(openai\.azure\.com|cognitiveservices\.azure\.com|services\.ai\.azure\.com)$/;

/** The header OPENAI_API_KEY travels in: OPENAI_API_KEY_HEADER, else by the base URL's host. */
export function openAiKeyHeader(config: Config): 'authorization' | 'api-key' {
  if (config.OPENAI_API_KEY_HEADER !== undefined) return config.OPENAI_API_KEY_HEADER;
  const host = config.OPENAI_BASE_URL === undefined ? '' : new URL(config.OPENAI_BASE_URL).hostname;
  return AZURE_OPENAI_HOST.test(host) ? 'api-key' : 'authorization';
}

/** The backend each catalog model is served by. */
export function modelBackends(config: Config): Record<string, GeneratorBackend> {
  return Object.fromEntries(MODEL_MODULES.map((m) => [m.entry.id, config[m.configuration.backendVariable]]));
}

/**
 * The provider's model serving each catalog model on a remote backend: its own variable when
 * set, else the backend's model (GEMINI_MODEL, OPENAI_IMAGE_MODEL). Local models are absent
 * (decision 0011).
 */
export function upstreamModels(config: Config): Record<string, string> {
  const entries: [string, string][] = [];
  for (const { entry, configuration } of MODEL_MODULES) {
    const backend = config[configuration.backendVariable];
    const own = config[configuration.upstreamModelVariable];
    if (backend === 'gemini') entries.push([entry.id, own ?? config.GEMINI_MODEL]);
    if (backend === 'openai' && (own ?? config.OPENAI_IMAGE_MODEL) !== undefined)
      entries.push([entry.id, own ?? config.OPENAI_IMAGE_MODEL!]);
  }
  return Object.fromEntries(entries);
}

/** OPENAI_IMAGE_QUALITY must be a value every model on the openai backend takes: else it stops the start. */
function checkOpenAiQuality(config: Config): void {
  const quality = config.OPENAI_IMAGE_QUALITY;
  if (quality === undefined) return;
  const backends = modelBackends(config);
  for (const [catalogModel, model] of Object.entries(upstreamModels(config))) {
    if (backends[catalogModel] !== 'openai') continue;
    const family = openAiModelFamily(model, config.OPENAI_MODEL_FAMILY);
    const accepted = openAiQualities(model, family);
    if (accepted.includes(quality)) continue;
    const takes =
      accepted.length > 0 ? `takes ${accepted.join(', ')}` : "takes no quality (a compatible provider's model)";
    throw new ConfigError(
      `Invalid environment variable OPENAI_IMAGE_QUALITY=${JSON.stringify(quality)}: ${model} (serving ${catalogModel}) ${takes}`,
    );
  }
}

const REQUIRED_FOR_BACKEND: Record<GeneratorBackend, (keyof Config)[]> = {
  local: [],
  gemini: ['GEMINI_API_KEY'],
  openai: ['OPENAI_API_KEY', 'OPENAI_IMAGE_MODEL'],
};

/** A backend chosen without what it needs stops the process at start, not at the first task. */
function checkBackendSettings(config: Config): void {
  for (const { configuration } of MODEL_MODULES) {
    const variable = configuration.backendVariable;
    const backend = config[variable];
    const missing = REQUIRED_FOR_BACKEND[backend].find(
      // On Vertex AI the credentials are Google Cloud's, not an API key.
      (name) =>
        config[name] === undefined && !(name === 'GEMINI_API_KEY' && config.GEMINI_VERTEX_PROJECT !== undefined),
    );
    if (missing) throw new ConfigError(`Missing environment variable ${missing}: ${variable}=${backend} needs it.`);
  }
}

/** The S3 settings an s3 blob store cannot run without, and the ones that only make sense with it. */
function checkBlobStoreSettings(config: Config): void {
  if (config.BLOB_STORE === 's3') {
    const missing = (['S3_BUCKET', 'S3_REGION'] as const).find((name) => config[name] === undefined);
    if (missing) throw new ConfigError(`Missing environment variable ${missing}: BLOB_STORE=s3 needs it.`);
  } else if (config.S3_PRESIGNED_DOWNLOADS) {
    throw new ConfigError(
      `Invalid environment variable S3_PRESIGNED_DOWNLOADS=true: it needs BLOB_STORE=s3 (BLOB_STORE=${config.BLOB_STORE}).`,
    );
  }
  if (config.S3_PREFIX !== '') {
    try {
      assertValidBlobKey(config.S3_PREFIX.replace(/\/$/, ''));
    } catch {
      throw new ConfigError(
        `Invalid environment variable S3_PREFIX=${JSON.stringify(config.S3_PREFIX)}: slash-separated segments, none empty or starting with a dot, no leading slash, backslash or control character`,
      );
    }
  }
}

/** S3_PREFIX as keys are prefixed with: "" or ending with one slash. */
export function s3KeyPrefix(config: Config): string {
  return config.S3_PREFIX === '' || config.S3_PREFIX.endsWith('/') ? config.S3_PREFIX : `${config.S3_PREFIX}/`;
}

const NAMED_PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Dotted-quad IPv4 or IPv6, with or without a prefix length ("2" would be a valid IPv4 to ipaddr.js). */
function isAddressOrRange(entry: string): boolean {
  return (
    ipaddr.IPv4.isValidFourPartDecimal(entry) ||
    ipaddr.IPv4.isValidCIDRFourPartDecimal(entry) ||
    ipaddr.IPv6.isValid(entry) ||
    ipaddr.IPv6.isValidCIDR(entry)
  );
}

/**
 * TRUST_PROXY as fastify's `trustProxy`: the addresses and ranges of the proxies whose
 * X-Forwarded-For is believed. Neither "trust everything" nor a hop count is offered: both let a
 * client that reaches the service directly choose its own address and escape the per-address
 * limits (fastify ignores hop counts for that reason).
 */
export function trustProxyOption(value: string): string[] {
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const invalid = entries.find((entry) => !NAMED_PROXY_RANGES.has(entry) && !isAddressOrRange(entry));
  if (entries.length === 0 || invalid !== undefined) {
    throw new ConfigError(
      `Invalid environment variable TRUST_PROXY=${JSON.stringify(value)}: expected comma-separated addresses, CIDR ranges, loopback, linklocal or uniquelocal${invalid ? ` (not one: ${JSON.stringify(invalid)})` : ''}`,
    );
  }
  return entries;
}

export function publicBaseUrl(config: Config): string {
  return (config.PUBLIC_BASE_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/+$/, '');
}

export function sqlitePath(config: Config): string {
  return path.join(config.DATA_DIR, 'imagegen.sqlite');
}
