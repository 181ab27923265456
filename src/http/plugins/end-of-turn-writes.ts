import type { FastifyInstance, onSendHookHandler } from 'fastify';
import { withRouteHook } from '../route-hooks.js';

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
  const sends = new EndOfTurnQueue((flush) => setImmediate(flush));
  const sendAtEndOfTurn: onSendHookHandler = (_request, _reply, payload, done) => {
    sends.add(() => done(null, payload));
  };
  // Registered on the root before any route, so it is each read route's first onSend hook.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((method) => method === 'GET' || method === 'HEAD')) route.onSend = withRouteHook(route.onSend, sendAtEndOfTurn);
  });
}

/** Callbacks run together, in the order they came, once per scheduled flush. */
export class EndOfTurnQueue {
  private pending: (() => void)[] = [];

  /**
   * schedule(flush) must call flush once, later; setImmediate calls it after the turn's I/O.
   * onError gets what a callback threw, after which the others still run; by default it is thrown
   * again on the next tick, so that it surfaces as it would have without the queue.
   */
  constructor(
    private readonly schedule: (flush: () => void) => void,
    private readonly onError: (error: unknown) => void = (error) =>
      process.nextTick(() => {
        throw error;
      }),
  ) {}

  add(callback: () => void): void {
    if (this.pending.push(callback) === 1) this.schedule(this.flush);
  }

  private readonly flush = (): void => {
    const due = this.pending;
    // Callbacks added while these run (a response finished by another's send) wait for the next flush.
    this.pending = [];
    for (const callback of due) {
      try {
        callback();
      } catch (error) {
        this.onError(error);
      }
    }
  };
}
