import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { PIXEL_SIZES } from '../../schemas/pixel-sizes.js';
import type { JsonReply } from './fake-upstream.js';
import { geminiReply, openAiReply } from './provider-replies.js';
import { providerRefusal } from './provider-rules.js';

/**
 * A model provider of fixed capacity on loopback, for the capacity tests and the bench: at most
 * `capacity` calls in flight at once, each answered after `latencyMs` with a valid PNG; a call
 * beyond that is refused at once with the provider's documented capacity refusal. Gemini: 429
 * RESOURCE_EXHAUSTED (google.rpc.Status) with QuotaFailure and RetryInfo.retryDelay in its
 * details (https://ai.google.dev/gemini-api/docs/rate-limits, /troubleshooting). OpenAI images
 * API: 429 {error: {message, type: 'requests', param: null, code: 'rate_limit_exceeded'}} with a
 * `retry-after` header (https://platform.openai.com/docs/guides/rate-limits).
 *
 * A request the real provider would refuse (test/helpers/provider-rules.ts) gets its 400.
 * A refused call never holds a slot; an accepted call holds its slot for its whole latency even if
 * the client goes away, as a provider's model keeps working on it.
 */
export interface CapacityProviderOptions {
  /** Calls served at once; 0 refuses every call. */
  capacity: number;
  /** How long an accepted call takes. */
  latencyMs: number;
  /** Seconds a refusal asks the caller to wait (Gemini's retryDelay, OpenAI's retry-after); null omits it. Default 1. */
  retryDelay?: number | null;
}

export type ProviderApi = 'gemini' | 'openai';
export type CallOutcome = 'ok' | 'rate_limited' | 'bad_request' | 'abandoned';

/** One call as the provider saw it. */
export interface ProviderCall {
  api: ProviderApi;
  path: string;
  /** The prompt text (tests tag the account in it: the provider sees no account). */
  prompt: string;
  /** Date.now() when the whole request had arrived. */
  receivedAt: number;
  /**
   * performance.now() at the same moment: sub-ms, for a latency timed from another reading of this
   * process's performance.now() (the bench's dispatch latency, create → generator called).
   */
  receivedAtHighRes: number;
  /** Date.now() when it was answered (or abandoned); null while in flight. */
  answeredAt: number | null;
  outcome: CallOutcome | null;
  /** Calls in flight, this one included, when it was accepted; 0 for a refusal. */
  inFlightAtStart: number;
}

interface ParsedCall {
  api: ProviderApi;
  prompt: string;
  width: number;
  height: number;
}

const GEMINI_PATH = /^\/v1beta\/models\/([^/:]+):generateContent$/;
const OPENAI_PATHS = new Set(['/v1/images/generations', '/v1/images/edits']);

export class CapacityProvider {
  readonly calls: ProviderCall[] = [];
  /** Most calls in flight at one time. */
  peakInFlight = 0;
  private inFlight = 0;
  private readonly retryDelay: number | null;
  private readonly pngs = new Map<string, Promise<string>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private waiters: { done: () => boolean; resolve: () => void }[] = [];

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    readonly options: CapacityProviderOptions,
  ) {
    this.retryDelay = options.retryDelay === undefined ? 1 : options.retryDelay;
  }

  /** Listens on 127.0.0.1 at a free port; `close()` it when done (tests: t.teardown). */
  static async start(options: CapacityProviderOptions): Promise<CapacityProvider> {
    let provider!: CapacityProvider;
    const server = http.createServer((req, res) => provider.handle(req, res));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    provider = new CapacityProvider(server, `http://127.0.0.1:${port}`, options);
    return provider;
  }

  /** Calls answered with an image. */
  get ok(): number {
    return this.count('ok');
  }

  /** Calls refused for capacity (429). */
  get rateLimited(): number {
    return this.count('rate_limited');
  }

  /** Calls answered, refused or abandoned so far. */
  get answered(): number {
    return this.calls.filter((call) => call.outcome !== null).length;
  }

  /** Resolves once `count` calls have been answered with an image. */
  okCalls(count: number): Promise<void> {
    return this.until(() => this.ok >= count);
  }

  /** Resolves once `count` calls have been refused for capacity. */
  rateLimitedCalls(count: number): Promise<void> {
    return this.until(() => this.rateLimited >= count);
  }

  /** Resolves once `count` calls have arrived. */
  received(count: number): Promise<void> {
    return this.until(() => this.calls.length >= count);
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private count(outcome: CallOutcome): number {
    return this.calls.filter((call) => call.outcome === outcome).length;
  }

  private until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ done, resolve }));
  }

  private changed(): void {
    const waiting = this.waiters;
    this.waiters = waiting.filter((waiter) => !waiter.done());
    for (const waiter of waiting) if (waiter.done()) waiter.resolve();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void this.serve(req, res, Buffer.concat(chunks)).catch((error: unknown) => {
        if (!res.headersSent) send(res, { status: 500, json: { error: { message: String(error) } } });
      });
    });
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    const api: ProviderApi | null = GEMINI_PATH.test(path) ? 'gemini' : OPENAI_PATHS.has(path) ? 'openai' : null;
    if (req.method !== 'POST' || api === null) {
      send(res, { status: 404, json: { error: { code: 404, message: `no route ${req.method} ${path}` } } });
      return;
    }
    const refusal = api === 'gemini' ? geminiAuthRefusal(req) : openAiAuthRefusal(req);
    if (refusal) {
      send(res, refusal);
      return;
    }
    const receivedAt = Date.now();
    const receivedAtHighRes = performance.now();
    const parsed = api === 'gemini' ? parseGemini(body) : await parseOpenAi(req, body, path);
    const call: ProviderCall = {
      api,
      path,
      prompt: typeof parsed === 'string' ? '' : parsed.prompt,
      receivedAt,
      receivedAtHighRes,
      answeredAt: null,
      outcome: null,
      inFlightAtStart: 0,
    };
    this.calls.push(call);
    if (typeof parsed === 'string') {
      this.finish(call, 'bad_request');
      send(res, api === 'gemini' ? geminiInvalid(parsed) : openAiInvalid(parsed));
      return;
    }
    const invalid = await providerRefusal({ url: path, headers: req.headers, body });
    if (invalid) {
      this.finish(call, 'bad_request');
      send(res, invalid);
      return;
    }
    if (this.inFlight >= this.options.capacity) {
      this.finish(call, 'rate_limited');
      send(res, api === 'gemini' ? this.geminiRefusal() : this.openAiRefusal());
      return;
    }
    this.inFlight += 1;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    call.inFlightAtStart = this.inFlight;
    const image = this.png(parsed.width, parsed.height);
    res.on('close', () => {
      if (!res.writableFinished && call.outcome === null) this.finish(call, 'abandoned');
    });
    const timer = setTimeout(async () => {
      this.timers.delete(timer);
      this.inFlight -= 1;
      if (call.outcome !== null) return this.changed();
      const data = await image;
      this.finish(call, 'ok');
      send(res, api === 'gemini' ? geminiReply.image(data) : openAiReply.image(data));
    }, this.options.latencyMs);
    this.timers.add(timer);
    this.changed();
  }

  private finish(call: ProviderCall, outcome: CallOutcome): void {
    call.outcome = outcome;
    call.answeredAt = Date.now();
    this.changed();
  }

  /** One PNG per size, made once: the fake costs no CPU per call. */
  private png(width: number, height: number): Promise<string> {
    const key = `${width}x${height}`;
    let png = this.pngs.get(key);
    if (!png) {
      png = sharp({ create: { width, height, channels: 3, background: '#3366cc' } })
        .png()
        .toBuffer()
        .then((bytes) => bytes.toString('base64'));
      this.pngs.set(key, png);
    }
    return png;
  }

  private geminiRefusal(): JsonReply {
    const details: unknown[] = [
      {
        '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
        violations: [
          {
            quotaMetric: 'generativelanguage.googleapis.com/generate_content_paid_tier_requests',
            quotaId: 'GenerateRequestsPerMinutePerProjectPerModel',
            quotaDimensions: { location: 'global', model: 'gemini-3-pro-image' },
            // A busy provider names a positive limit: quotaValue 0 is Gemini's "no quota for this model
            // on this tier", which an operator must fix (decision 0011), not a wait.
            quotaValue: String(Math.max(1, this.options.capacity)),
          },
        ],
      },
      {
        '@type': 'type.googleapis.com/google.rpc.Help',
        links: [
          {
            description: 'Learn more about Gemini API quotas',
            url: 'https://ai.google.dev/gemini-api/docs/rate-limits',
          },
        ],
      },
    ];
    if (this.retryDelay !== null)
      details.push({ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${this.retryDelay}s` });
    return geminiReply.error(
      429,
      'RESOURCE_EXHAUSTED',
      'You exceeded your current quota, please check your plan and billing details.',
      undefined,
      details,
    );
  }

  private openAiRefusal(): JsonReply {
    const wait = this.retryDelay === null ? '' : ` Please try again in ${this.retryDelay}s.`;
    return openAiReply.error(
      429,
      {
        message: `Rate limit reached for images in organization org-test on requests per min (RPM): Limit ${this.options.capacity}.${wait}`,
        type: 'requests',
        code: 'rate_limit_exceeded',
      },
      this.retryDelay === null ? undefined : { 'retry-after': String(this.retryDelay) },
    );
  }
}

function send(res: http.ServerResponse, reply: JsonReply): void {
  if (res.destroyed) return;
  res.writeHead(reply.status, { 'content-type': 'application/json; charset=UTF-8', ...reply.headers });
  res.end(JSON.stringify(reply.json));
}

function geminiAuthRefusal(req: http.IncomingMessage): JsonReply | null {
  if (req.headers['x-goog-api-key'] || /[?&]key=/.test(req.url ?? '')) return null;
  return geminiReply.error(
    403,
    'PERMISSION_DENIED',
    "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
  );
}

function openAiAuthRefusal(req: http.IncomingMessage): JsonReply | null {
  if (/^Bearer \S+/.test(req.headers.authorization ?? '')) return null;
  return openAiReply.error(401, {
    message: "You didn't provide an API key.",
    type: 'invalid_request_error',
    code: null,
  });
}

function geminiInvalid(message: string): JsonReply {
  return geminiReply.error(400, 'INVALID_ARGUMENT', message);
}

function openAiInvalid(message: string): JsonReply {
  return openAiReply.error(400, { message, type: 'invalid_request_error', code: null });
}

interface GeminiRequest {
  contents?: { parts?: { text?: unknown }[] }[];
  generationConfig?: { imageConfig?: { aspectRatio?: unknown; imageSize?: unknown } };
}

/** A generateContent body: the prompt is the text parts, the size Gemini's for imageConfig (1K 1:1 when unset). */
function parseGemini(body: Buffer): ParsedCall | string {
  let request: GeminiRequest;
  try {
    request = JSON.parse(body.toString('utf8')) as GeminiRequest;
  } catch {
    return 'Invalid JSON payload received.';
  }
  const parts = request.contents?.flatMap((content) => content.parts ?? []) ?? [];
  const prompt = parts
    .map((part) => part.text)
    .filter((text): text is string => typeof text === 'string')
    .join('\n');
  if (parts.length === 0) return '* GenerateContentRequest.contents: contents is not specified';
  const config = request.generationConfig?.imageConfig ?? {};
  const ratio = typeof config.aspectRatio === 'string' ? config.aspectRatio : '1:1';
  const size = typeof config.imageSize === 'string' ? config.imageSize : '1K';
  // Gemini 3 Pro Image's documented output sizes, the table the catalog shares (schemas/pixel-sizes.ts).
  const sizes = (PIXEL_SIZES as Record<string, Record<string, readonly [number, number]>>)[ratio];
  const dimensions = sizes?.[size];
  if (!dimensions) return `Unsupported imageConfig: aspectRatio ${ratio}, imageSize ${size}`;
  return { api: 'gemini', prompt, width: dimensions[0], height: dimensions[1] };
}

/** An images.generate (JSON) or images.edit (multipart) body: any WIDTHxHEIGHT size is served as asked; auto is 1024×1024. */
async function parseOpenAi(req: http.IncomingMessage, body: Buffer, path: string): Promise<ParsedCall | string> {
  let fields: { prompt?: unknown; model?: unknown; size?: unknown };
  try {
    if (path === '/v1/images/edits') {
      const form = await new Response(new Uint8Array(body), {
        headers: { 'content-type': String(req.headers['content-type']) },
      }).formData();
      if (form.getAll('image[]').length === 0 && form.getAll('image').length === 0)
        return "Missing required parameter: 'image'.";
      fields = { prompt: form.get('prompt'), model: form.get('model'), size: form.get('size') };
    } else {
      fields = JSON.parse(body.toString('utf8')) as typeof fields;
    }
  } catch {
    return 'We could not parse the JSON body of your request.';
  }
  if (typeof fields.prompt !== 'string' || fields.prompt.length === 0) return "Missing required parameter: 'prompt'.";
  const size = typeof fields.size === 'string' ? /^(\d{2,5})x(\d{2,5})$/.exec(fields.size) : null;
  if (fields.size !== undefined && fields.size !== null && fields.size !== 'auto' && !size)
    return `Invalid value: '${String(fields.size)}'. Expected WIDTHxHEIGHT or 'auto'.`;
  return {
    api: 'openai',
    prompt: fields.prompt,
    width: size ? Number(size[1]) : 1024,
    height: size ? Number(size[2]) : 1024,
  };
}
