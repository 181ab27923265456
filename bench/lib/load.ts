import autocannon from 'autocannon';

export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface LoadOptions {
  connections: number;
  durationSec: number;
  /** A first run whose figures are thrown away (JIT, caches, connection setup). */
  warmupSec: number;
  /** Run to this many requests instead of durationSec. */
  amount?: number;
  timeoutSec?: number;
}

/** What one autocannon run measured. Latencies in ms. */
export interface LoadSample {
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Responses with a status other than 2xx. */
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
  requests: number;
  durationSec: number;
  /** Bytes/s sent by the client (the request bodies). */
  sentBytesPerSec: number;
  statusCodes: Record<string, number>;
}

export async function runLoad(baseUrl: string, request: LoadRequest, options: LoadOptions): Promise<LoadSample> {
  const opts = {
    url: baseUrl + request.path,
    method: request.method,
    headers: { ...(request.body ? { 'content-type': 'application/json' } : {}), ...request.headers },
    body: request.body,
    connections: options.connections,
    timeout: options.timeoutSec ?? 30,
  };
  if (options.warmupSec > 0) await autocannon({ ...opts, duration: options.warmupSec });
  const started = performance.now();
  const result = await autocannon({ ...opts, ...(options.amount ? { amount: options.amount } : { duration: options.durationSec }) });
  const elapsedSec = (performance.now() - started) / 1000;
  const requests = result.requests.total;
  const bodyBytes = request.body ? Buffer.byteLength(request.body) : 0;
  const statusCodes: Record<string, number> = {};
  for (const [code, count] of Object.entries((result as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {})) {
    statusCodes[code] = count.count;
  }
  const durationSec = options.amount ? elapsedSec : result.duration;
  return {
    rps: requests / durationSec,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    max: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    requests,
    durationSec,
    sentBytesPerSec: (requests * bodyBytes) / durationSec,
    statusCodes,
  };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export interface Target {
  name: string;
  baseUrl: string;
  request: LoadRequest;
}

export interface AlternatingResult {
  /** Every sample of each target, in round order. */
  samples: Record<string, LoadSample[]>;
}

/**
 * Runs the targets in turn, round after round (R S R S R S …), so that whatever the machine does
 * meanwhile (thermal, neighbours, the page cache) falls on all of them alike.
 */
export async function alternate(targets: Target[], rounds: number, options: LoadOptions, onSample?: (name: string, s: LoadSample) => void): Promise<AlternatingResult> {
  const samples: Record<string, LoadSample[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const target of targets) {
      const sample = await runLoad(target.baseUrl, target.request, options);
      samples[target.name].push(sample);
      onSample?.(target.name, sample);
    }
  }
  return { samples };
}

/** The figures of one target over its rounds, and its ratio to the reference paired round by round. */
export interface Summary {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  rounds: number;
  /** Median over rounds of (this round's rps / the reference's rps in the same round). */
  ratio: number | null;
  ratios: number[];
}

export function summarize(samples: LoadSample[], reference?: LoadSample[]): Summary {
  const ratios = reference ? samples.map((s, i) => s.rps / reference[i].rps) : [];
  return {
    rps: median(samples.map((s) => s.rps)),
    p50: median(samples.map((s) => s.p50)),
    p99: median(samples.map((s) => s.p99)),
    non2xx: samples.reduce((n, s) => n + s.non2xx, 0),
    errors: samples.reduce((n, s) => n + s.errors, 0),
    rounds: samples.length,
    ratio: reference ? median(ratios) : null,
    ratios,
  };
}
