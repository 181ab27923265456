import type { FastifyInstance, onSendHookHandler } from 'fastify';
import { withRouteHook } from '../route-hooks.js';

/**
 * An answer waits at most this long for the end of its turn: past it, the answers held so far are
 * written at once. A turn of cheap reads ends well within it; a turn of lists (about half a
 * millisecond each under load) would otherwise hold the first for the whole turn, which measured
 * 5–10 % slower than writing each at once.
 */
const MAX_HOLD_MS = 1;

/**
 * Answers to GET (and HEAD) requests finished in the same turn of the event loop are written
 * together at its end, one after another, instead of each as soon as its handler returns.
 *
 * Each write to a socket whose reader is asleep wakes that reader. When the reader is on the same
 * machine (a proxy or sidecar in front of the service, or the bench's load generator), that is an
 * interrupt to another core, and on a virtual machine an exit to the hypervisor, paid by the
 * writer: it was about half of the CPU of a read under load (BENCHMARKS.md, "Optimisations").
 * Written back to back, the first answer wakes the reader and the others find it awake. At light
 * load a turn finishes one answer, which is written microseconds later, in the same turn.
 *
 * Only reads: a read is answered in the turn that received it, one at a time, while a write is
 * answered after its turn's group commit, where the answers of the whole batch are already
 * written in one run of callbacks; deferring those too made creates 5–9 % slower.
 */
export function registerEndOfTurnWrites(app: FastifyInstance): void {
  const sends = new EndOfTurnQueue({ schedule: (flush) => setImmediate(flush), maxHoldMs: MAX_HOLD_MS });
  const sendAtEndOfTurn: onSendHookHandler = (_request, _reply, payload, done) => {
    sends.add(() => done(null, payload));
  };
  // Registered on the root before any route, so it is each read route's first onSend hook.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((method) => method === 'GET' || method === 'HEAD')) route.onSend = withRouteHook(route.onSend, sendAtEndOfTurn);
  });
}

/**
 * Callbacks run together, in the order they came: at the scheduled flush, or at once with the
 * ones before them when the first has waited maxHoldMs.
 */
export class EndOfTurnQueue {
  private pending: (() => void)[] = [];
  private heldSince = 0;
  private flushScheduled = false;

  /**
   * schedule(flush) must call flush once, later; setImmediate calls it after the turn's I/O.
   * onError gets what a callback threw, after which the others still run; by default it is thrown
   * again on the next tick, so that it surfaces as it would have without the queue.
   */
  constructor(
    private readonly options: {
      schedule: (flush: () => void) => void;
      maxHoldMs: number;
      clock?: () => number;
      onError?: (error: unknown) => void;
    },
  ) {}

  add(callback: () => void): void {
    const now = this.options.clock ? this.options.clock() : performance.now();
    if (this.pending.length === 0) {
      this.heldSince = now;
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        this.options.schedule(this.scheduledFlush);
      }
    }
    this.pending.push(callback);
    if (now - this.heldSince >= this.options.maxHoldMs) this.flush();
  }

  private readonly scheduledFlush = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  private flush(): void {
    const due = this.pending;
    // Callbacks added while these run (an answer finished by another's send) wait for the next flush.
    this.pending = [];
    for (const callback of due) {
      try {
        callback();
      } catch (error) {
        (this.options.onError ?? rethrowOnNextTick)(error);
      }
    }
  }
}

function rethrowOnNextTick(error: unknown): void {
  process.nextTick(() => {
    throw error;
  });
}
