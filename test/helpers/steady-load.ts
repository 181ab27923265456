import { setTimeout as delay } from 'node:timers/promises';
import type { Test } from 'tap';
import { filePart, multipartRequest } from './multipart.js';

/**
 * A steady stream of creates, uploads and reads from several accounts, kept up while a test cuts a
 * dependency (decision 0019, "each fault under load"). Every answer is counted by kind and status, each
 * accepted create's task is kept per account, and any answer a client must not see during an
 * outage (anything but a success or a 503 `unavailable` with Retry-After) is kept with its body.
 */

export type LoadKind = 'create' | 'upload' | 'read';

export interface LoadAccount {
  accountId: string;
  auth: { authorization: string };
}

/** What the load sends through: `app.inject` in process, or fetch against a listening server. */
export type SendRequest = (request: {
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
}) => Promise<{ status: number; headers: Record<string, unknown>; body: string }>;

export interface LoadReport {
  /** kind → status → answers. */
  answers: Record<LoadKind, Map<number, number>>;
  /** accountId → ids of its accepted (202) tasks. */
  accepted: Map<string, string[]>;
  /** Idempotency-Keys of creates answered 503, per account (to retry once the dependency is back). */
  refusedCreates: Map<string, string[]>;
  /** Answers no client may see during an outage: `kind status code` and the body. */
  unexpected: string[];
}

export interface SteadyLoad {
  readonly report: LoadReport;
  /** Resolves once `condition` holds of the report (checked after each answer), or rejects after `ms`. */
  until(condition: (report: LoadReport) => boolean, ms?: number): Promise<void>;
  /** Answers of `kind` with `status` so far. */
  count(kind: LoadKind, status: number): number;
  /** Answers so far, of every kind and status. */
  total(): number;
  /** Stops after the requests in flight, and returns the report. */
  stop(): Promise<LoadReport>;
}

export const CREATE_URL = '/api/v1/images/generations';

/** The app's inject as a SendRequest. */
export function viaInject(app: {
  inject(options: object): Promise<{ statusCode: number; headers: Record<string, unknown>; payload: string }>;
}): SendRequest {
  return async (request) => {
    const response = await app.inject(request);
    return { status: response.statusCode, headers: response.headers, body: response.payload };
  };
}

/** fetch against a listening server as a SendRequest. */
export function viaFetch(base: string): SendRequest {
  return async ({ method, url, headers, payload }) => {
    const body = typeof payload === 'string' || payload === undefined ? payload : new Uint8Array(payload);
    const response = await fetch(`${base}${url}`, { method, headers, body });
    return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
  };
}

/**
 * One lane per account, each cycling through `kinds` (a create with an Idempotency-Key of its own,
 * an upload of `png`, a read of its task list) with `paceMs` between requests.
 */
export function startSteadyLoad(
  send: SendRequest,
  accounts: LoadAccount[],
  options: { kinds?: LoadKind[]; png?: Buffer; paceMs?: number; prefix?: string } = {},
): SteadyLoad {
  const { kinds = ['create', 'upload', 'read'], png, paceMs = 20, prefix = 'load' } = options;
  if (kinds.includes('upload') && !png) throw new Error('an upload load needs a png');
  const report: LoadReport = {
    answers: { create: new Map(), upload: new Map(), read: new Map() },
    accepted: new Map(accounts.map((a) => [a.accountId, []])),
    refusedCreates: new Map(accounts.map((a) => [a.accountId, []])),
    unexpected: [],
  };
  const waiters = new Set<() => void>();
  let running = true;

  const one = async (account: LoadAccount, kind: LoadKind, i: number) => {
    const key = `${prefix}-${account.accountId}-${i}`;
    let response: Awaited<ReturnType<SendRequest>>;
    if (kind === 'create') {
      response = await send({
        method: 'POST',
        url: CREATE_URL,
        headers: { ...account.auth, 'content-type': 'application/json', 'idempotency-key': key },
        payload: createBody(key),
      });
    } else if (kind === 'upload') {
      const request = multipartRequest([filePart(png!, { filename: 'ref.png', contentType: 'image/png' })]);
      response = await send({
        method: 'POST',
        url: '/api/v1/media',
        headers: { ...account.auth, ...request.headers },
        payload: request.payload,
      });
    } else {
      response = await send({ method: 'GET', url: `${CREATE_URL}?limit=5`, headers: account.auth });
    }
    const byStatus = report.answers[kind];
    byStatus.set(response.status, (byStatus.get(response.status) ?? 0) + 1);
    const code = response.status >= 400 ? (JSON.parse(response.body) as { code?: string }).code : undefined;
    if (kind === 'create' && response.status === 202)
      report.accepted
        .get(account.accountId)!
        .push((JSON.parse(response.body) as { data: { task_id: string } }).data.task_id);
    if (kind === 'create' && response.status === 503) report.refusedCreates.get(account.accountId)!.push(key);
    const fine =
      (response.status >= 200 && response.status < 300) ||
      (response.status === 503 && code === 'unavailable' && response.headers['retry-after'] === '5');
    if (!fine) report.unexpected.push(`${kind} ${response.status} ${code ?? ''}: ${response.body.slice(0, 300)}`);
  };

  const lanes = accounts.map(async (account) => {
    for (let i = 0; running; i++) {
      await one(account, kinds[i % kinds.length]!, i);
      for (const wake of waiters) wake();
      await delay(paceMs);
    }
  });

  return {
    report,
    count: (kind, status) => report.answers[kind].get(status) ?? 0,
    total: () => Object.values(report.answers).reduce((n, m) => n + [...m.values()].reduce((a, b) => a + b, 0), 0),
    until(condition, ms = 30_000) {
      if (condition(report)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the load did not reach the expected state within ${ms} ms: ${describe(report)}`));
        }, ms);
        const check = () => {
          if (!condition(report)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
      });
    },
    async stop() {
      running = false;
      await Promise.all(lanes);
      return report;
    },
  };
}

/** A create's body, the same for its retries (an Idempotency-Key is bound to its body). */
const createBody = (key: string) => JSON.stringify({ model: 'alpha-pro', prompt: key });

/**
 * Each create refused with 503, retried with its Idempotency-Key as a client would once the
 * dependency is back: a key its failed attempt left in progress answers 409 with Retry-After until
 * its lease lapses, which is waited (`inProgressAnswers` counts them). Returns, per account, the
 * task each retry was answered with: a new one, or the one the refused attempt had made after all.
 */
export async function retryRefusedCreates(
  send: SendRequest,
  accounts: LoadAccount[],
  report: LoadReport,
): Promise<{ tasks: Map<string, string[]>; inProgressAnswers: number; failures: string[] }> {
  const tasks = new Map<string, string[]>();
  const failures: string[] = [];
  let inProgressAnswers = 0;
  for (const account of accounts) {
    const ids: string[] = [];
    for (const key of report.refusedCreates.get(account.accountId) ?? []) {
      for (let attempt = 0; ; attempt++) {
        const response = await send({
          method: 'POST',
          url: CREATE_URL,
          headers: { ...account.auth, 'content-type': 'application/json', 'idempotency-key': key },
          payload: createBody(key),
        });
        if (response.status === 202) {
          ids.push((JSON.parse(response.body) as { data: { task_id: string } }).data.task_id);
          break;
        }
        if (response.status === 409 && attempt < 10) {
          inProgressAnswers++;
          await delay(Number(response.headers['retry-after'] ?? 1) * 1000);
          continue;
        }
        failures.push(`${key}: ${response.status} ${response.body.slice(0, 200)}`);
        break;
      }
    }
    tasks.set(account.accountId, ids);
  }
  return { tasks, inProgressAnswers, failures };
}

/** The answers by kind and status, for a test comment. */
export function describe(report: LoadReport): string {
  return JSON.stringify(
    Object.fromEntries(Object.entries(report.answers).map(([kind, m]) => [kind, Object.fromEntries(m)])),
  );
}

/** Clients saw only successes and 503 `unavailable` with Retry-After: never a 500, never a 400. */
export function assertOnlyServedOrUnavailable(t: Test, report: LoadReport): void {
  t.comment(`answers under load: ${describe(report)}`);
  t.same(report.unexpected.slice(0, 5), [], 'every answer a success or 503 unavailable with Retry-After');
}
