import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.js';
import { publicBaseUrl } from '../../config.js';

/**
 * The Playground (decision 0020): a static page, its script (bundled by `npm run build` from
 * playground/main.ts on the typed client) and its styles, served from memory. It talks only to
 * this origin's API with a key the person types in; no server-side templating.
 */
const FILES = {
  'index.html': 'text/html; charset=utf-8',
  'playground.js': 'text/javascript; charset=utf-8',
  'playground.css': 'text/css; charset=utf-8',
  // The page's icon (<link rel="icon">): without one the browser asks for /favicon.ico and logs its 404.
  'favicon.svg': 'image/svg+xml',
} as const;

/** Where the built page is: dist/playground next to the compiled server, or under the checkout. */
export function defaultPlaygroundDir(): string {
  const here = fileURLToPath(new URL('../../../', import.meta.url));
  // Compiled: dist/src/http/routes → dist/playground. From source (tsx): <root>/dist/playground.
  const candidates = [join(here, 'playground'), join(here, 'dist', 'playground')];
  return candidates.find((dir) => existsSync(join(dir, 'playground.js'))) ?? candidates[1];
}

function origin(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * Where the page's images may come from besides itself: the signed result URLs name
 * PUBLIC_BASE_URL, and with S3 presigned downloads they redirect to the bucket's origin.
 */
export function playgroundContentSecurityPolicy(config: Config): string {
  const api = origin(publicBaseUrl(config));
  const images = new Set<string>(["'self'", 'blob:']);
  const connect = new Set<string>(["'self'"]);
  if (api) {
    images.add(api);
    connect.add(api);
  }
  if (config.BLOB_STORE === 's3' && config.S3_PRESIGNED_DOWNLOADS) {
    const endpoint = origin(config.S3_ENDPOINT);
    if (endpoint) {
      const { protocol, host } = new URL(endpoint);
      images.add(endpoint);
      if (config.S3_BUCKET) images.add(`${protocol}//${config.S3_BUCKET}.${host}`);
    } else if (config.S3_REGION) {
      images.add(`https://s3.${config.S3_REGION}.amazonaws.com`);
      if (config.S3_BUCKET) images.add(`https://${config.S3_BUCKET}.s3.${config.S3_REGION}.amazonaws.com`);
    }
  }
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src ${[...images].join(' ')}`,
    `connect-src ${[...connect].join(' ')}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export async function playgroundRoutes(app: FastifyInstance, options: { config: Config; dir?: string }) {
  const dir = options.dir ?? defaultPlaygroundDir();
  const policy = playgroundContentSecurityPolicy(options.config);
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const [name, type] of Object.entries(FILES)) {
    const path = join(dir, name);
    if (existsSync(path)) files.set(name, { body: readFileSync(path), type });
  }
  if (files.size < Object.keys(FILES).length)
    app.log.warn({ dir }, 'the Playground is not built (npm run build); /playground answers 404');

  const send = (name: keyof typeof FILES) => async (_request: unknown, reply: import('fastify').FastifyReply) => {
    const file = files.get(name);
    if (!file)
      return reply.code(404).type('text/plain; charset=utf-8').send('The Playground is not built: npm run build');
    // helmet (app.ts) gives every answer nosniff, no-referrer and a CSP for /docs; the page
    // replaces that CSP with its own (the result URLs' origins) and forbids every frame.
    return reply
      .header('content-security-policy', policy)
      .header('x-frame-options', 'DENY')
      .header('cache-control', 'no-cache')
      .type(file.type)
      .send(file.body);
  };
  // Hidden from the OpenAPI document, as Swagger UI's routes are: they are a page, not the API.
  app.get('/playground', { schema: { hide: true } }, send('index.html'));
  app.get('/playground/playground.js', { schema: { hide: true } }, send('playground.js'));
  app.get('/playground/playground.css', { schema: { hide: true } }, send('playground.css'));
  app.get('/playground/favicon.svg', { schema: { hide: true } }, send('favicon.svg'));
}
