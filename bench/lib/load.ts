import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /**
   * Connection i sends these headers (over `headers`) and body instead, cycling: e.g. one API key
   * per connection, as if each connection were a client of its own.
   */
  perConnection?: { headers: Record<string, string>; body?: string }[];
  /** Every `[<id>]` in the request (headers included) becomes a new unique id per request. */
  uniqueIds?: boolean;
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
  /** Bytes/s the client received (responses, headers included). */
  receivedBytesPerSec: number;
  statusCodes: Record<string, number>;
  /** CPU time (user + system) the server process spent per request during the measured run, µs. */
  cpuUsPerRequest: number | null;
  /** Share of one core the server process used during the measured run. */
  cpuCores: number | null;
}

const CLOCK_TICKS_PER_SEC = 100;

/** utime + stime of a process in seconds, from /proc/<pid>/stat (all its threads). */
export function cpuSecondsOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SEC;
  } catch {
    return null;
  }
}

export async function runLoad(
  baseUrl: string,
  request: LoadRequest,
  options: LoadOptions,
  serverPid?: number,
  /** Called before the warm-up and again before the measured run. */
  beforeRun?: () => void,
): Promise<LoadSample> {
  const headers = { ...(request.body ? { 'content-type': 'application/json' } : {}), ...request.headers };
  const opts = {
    url: baseUrl + request.path,
    method: request.method,
    headers,
    body: request.body,
    connections: options.connections,
    timeout: options.timeoutSec ?? 30,
    idReplacement: request.uniqueIds ?? false,
  };
  const perConnection = request.perConnection;
  const setupClient = () => {
    let next = 0;
    return perConnection?.length
      ? (client: autocannon.Client) => {
          const own = perConnection[next++ % perConnection.length];
          client.setHeadersAndBody({ ...headers, ...own.headers }, own.body ?? request.body);
        }
      : undefined;
  };
  if (options.warmupSec > 0) {
    beforeRun?.();
    await autocannon({ ...opts, duration: options.warmupSec, setupClient: setupClient() });
  }
  beforeRun?.();
  const started = performance.now();
  const cpuBefore = serverPid ? cpuSecondsOf(serverPid) : null;
  const length = options.amount ? { amount: options.amount } : { duration: options.durationSec };
  const result = await autocannon({ ...opts, setupClient: setupClient(), ...length });
  const elapsedSec = (performance.now() - started) / 1000;
  const cpuAfter = serverPid ? cpuSecondsOf(serverPid) : null;
  const cpuSec = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  const requests = result.requests.total;
  const bodyBytes = request.body ? Buffer.byteLength(request.body) : 0;
  const statusCodes: Record<string, number> = {};
  const stats = (result as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats;
  for (const [code, count] of Object.entries(stats ?? {})) {
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
    receivedBytesPerSec: result.throughput.total / durationSec,
    statusCodes,
    cpuUsPerRequest: cpuSec !== null && requests > 0 ? Math.round((cpuSec * 1e6) / requests) : null,
    cpuCores: cpuSec !== null ? Math.round((cpuSec / elapsedSec) * 100) / 100 : null,
  };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The value at quantile q (0–1) of values sorted ascending (nearest rank); NaN for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** p50, p99 and max of values (any order), rounded to 0.01. */
export function percentilesOf(values: readonly number[]): { p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 100) / 100;
  return { p50: round(quantile(sorted, 0.5)), p99: round(quantile(sorted, 0.99)), max: round(quantile(sorted, 1)) };
}

export interface Target {
  name: string;
  baseUrl: string;
  /** The server's process, for its CPU time. */
  pid?: number;
  /** Runs before the warm-up and before the measured run of this target. */
  beforeRun?: () => void;
  request: LoadRequest;
  /** Loads the target with another client than autocannon (e.g. for large responses). */
  load?: (options: LoadOptions) => Promise<LoadSample>;
}

export interface AlternatingResult {
  /** Every sample of each target, in round order. */
  samples: Record<string, LoadSample[]>;
}

/**
 * Runs the targets in turn, round after round (R S R S R S …), so that whatever the machine does
 * meanwhile (thermal, neighbours, the page cache) falls on all of them alike. The first target (the
 * reference) opens every round; the others take turns at each place after it, one place further
 * each round, so that in a side-by-side run no build always follows the reference or always comes
 * last.
 */
export async function alternate(
  targets: Target[],
  rounds: number,
  options: LoadOptions,
  onSample?: (name: string, s: LoadSample) => void,
): Promise<AlternatingResult> {
  const samples: Record<string, LoadSample[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
  const [first, ...others] = targets;
  for (let round = 0; round < rounds; round++) {
    const turn = round % Math.max(1, others.length);
    for (const target of [first, ...others.slice(turn), ...others.slice(0, turn)]) {
      const sample = target.load
        ? await target.load(options)
        : await runLoad(target.baseUrl, target.request, options, target.pid, target.beforeRun);
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
  /** Median CPU µs per request of the server process. */
  cpuUsPerRequest: number | null;
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
    cpuUsPerRequest: samples.every((s) => s.cpuUsPerRequest !== null)
      ? median(samples.map((s) => s.cpuUsPerRequest!))
      : null,
  };
}
