import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../../config.js';
import { publicBaseUrl } from '../../config.js';

/**
 * The browser pages: the Playground (decision 0020) at /playground and the console (decision 0037)
 * at /console. Each is a static page, its script (bundled by `npm run build` from <page>/main.ts
 * on the typed client, scripts/build-pages.ts) and its styles, served from memory with a CSP of
 * its own. They talk only to this origin's API with a key the person types in; no server-side
 * templating.
 */
export const BUILT_PAGES = ['playground', 'console'] as const;
export type BuiltPage = (typeof BUILT_PAGES)[number];

const TITLES: Record<BuiltPage, string> = { playground: 'The Playground', console: 'The console' };

function filesOf(page: BuiltPage): Record<string, string> {
  return {
    'index.html': 'text/html; charset=utf-8',
    [`${page}.js`]: 'text/javascript; charset=utf-8',
    [`${page}.css`]: 'text/css; charset=utf-8',
    // The page's icon (<link rel="icon">): without one the browser asks for /favicon.ico and logs its 404.
    'favicon.svg': 'image/svg+xml',
  };
}

/** Where a built page is: dist/<page> next to the compiled server, or under the checkout. */
export function defaultPageDir(page: BuiltPage): string {
  const here = fileURLToPath(new URL('../../../', import.meta.url));
  // Compiled: dist/src/http/routes → dist/<page>. From source (tsx): <root>/dist/<page>.
  const candidates = [join(here, page), join(here, 'dist', page)];
  return candidates.find((dir) => existsSync(join(dir, `${page}.js`))) ?? candidates[1];
}

function origin(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** A page's policy: its own script and styles only, nothing inline, no frame, images and requests where named. */
function pageContentSecurityPolicy(images: Iterable<string>, connect: Iterable<string>): string {
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

/**
 * Where the Playground's images may come from besides itself: the signed result URLs name
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
  return pageContentSecurityPolicy(images, connect);
}

/** The console shows no image but its icon and calls only /admin/v1 on its own origin. */
export function consoleContentSecurityPolicy(): string {
  return pageContentSecurityPolicy(["'self'"], ["'self'"]);
}

export interface BuiltPageRoutesOptions {
  page: BuiltPage;
  /** The page's Content-Security-Policy. */
  policy: string;
  /** The built page; default: dist/<page> (defaultPageDir). */
  dir?: string;
}

export async function builtPageRoutes(app: FastifyInstance, { page, policy, dir: given }: BuiltPageRoutesOptions) {
  const dir = given ?? defaultPageDir(page);
  const files = new Map<string, { body: Buffer; type: string }>();
  const expected = filesOf(page);
  for (const [name, type] of Object.entries(expected)) {
    const path = join(dir, name);
    if (existsSync(path)) files.set(name, { body: readFileSync(path), type });
  }
  if (files.size < Object.keys(expected).length)
    app.log.warn({ dir }, `${TITLES[page]} is not built (npm run build); /${page} answers 404`);

  const send = (name: string) => async (_request: unknown, reply: FastifyReply) => {
    const file = files.get(name);
    if (!file)
      return reply.code(404).type('text/plain; charset=utf-8').send(`${TITLES[page]} is not built: npm run build`);
    // helmet (app.ts) gives every answer nosniff, no-referrer and a CSP for /docs; the page
    // replaces that CSP with its own and forbids every frame.
    return reply
      .header('content-security-policy', policy)
      .header('x-frame-options', 'DENY')
      .header('cache-control', 'no-cache')
      .type(file.type)
      .send(file.body);
  };
  // Hidden from the OpenAPI document, as Swagger UI's routes are: they are a page, not the API.
  app.get(`/${page}`, { schema: { hide: true } }, send('index.html'));
  for (const name of Object.keys(expected).filter((name) => name !== 'index.html'))
    app.get(`/${page}/${name}`, { schema: { hide: true } }, send(name));
}
