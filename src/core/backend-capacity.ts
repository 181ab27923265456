/**
 * How many calls a model backend may have in flight at once, found without being told (docs/design.md §4,
 * "Capacity"). A provider's quota is a number of calls at once (or per minute) that it does not
 * publish; beyond it, it refuses calls with 429 / RESOURCE_EXHAUSTED / an overloaded 503. The
 * limit is probed like TCP's congestion window (and Netflix's concurrency-limits AIMD):
 *
 * - slow start: until the provider first refuses a call, each successful call made while the
 *   limit was full adds one (the limit doubles per round trip), so a large quota is found fast;
 * - decrease: a capacity refusal brings the limit down to the calls the provider was holding for
 *   us then (and by one at least: the refused call was beyond what the provider takes), at most
 *   once per typical call duration, since the refusals of one overshoot arrive together. A
 *   provider refuses at once the first call beyond its capacity, so what it held is its capacity:
 *   a slow start that doubled past it in one round trip lands on it, and so does one that passed
 *   it by one call; a refused probe above a known ceiling puts the limit back on it;
 * - multiplicative decrease: when the provider held fewer of our calls than at the last refusal
 *   (its capacity fell, e.g. to another client of the same quota, and may fall further), or none,
 *   the limit is cut by a quarter as well;
 * - additive increase: after a refusal, each successful call made while the limit was full adds
 *   1/limit (one per round trip) back up to just below the limit that was refused, then only a
 *   thirtieth of that around it: each probe of a known ceiling costs a refusal and, when the
 *   provider asks for one, a pause of the whole backend, so it is made rarely; and
 *   1/limit again once past it (the provider takes more than it did);
 * - a confirmed ceiling is probed more rarely still: once two refusals in a row found the provider
 *   holding the same number of our calls, the next probe waits for PROBE_PAUSES times the pause
 *   the last refusal asked for (if that is longer than PROBE_SLOWDOWN round trips), so that
 *   probing costs about 1/PROBE_PAUSES of the backend's time even when the provider asks for
 *   pauses longer than its calls. Not after one refusal: what the provider held is read a
 *   moment after the refusal, a call that ended meanwhile is missed, and a ceiling found one too
 *   low is only found out by the next probe;
 * - a provider's Retry-After (or RetryInfo retryDelay) pauses the backend's new calls that long.
 *
 * The state is shared by every worker process (kept in the store, updated atomically with these
 * functions), so a cluster together stays under the provider's limit. Times are epoch
 * milliseconds: the core reads no clock.
 */

export interface BackendLimitSettings {
  /** The working limit starts here. */
  initial: number;
  /** Never above this (`<BACKEND>_MAX_CONCURRENCY`). */
  max: number;
  /**
   * How long a backend found unavailable (our key, billing, quota) is left alone before one probe
   * call (BACKEND_UNAVAILABLE_COOLDOWN_MS); default UNAVAILABLE_COOLDOWN_MS.
   */
  unavailableCooldownMs?: number;
}

/** The default cool-down of a backend found unavailable, before its probe call. */
export const UNAVAILABLE_COOLDOWN_MS = 60_000;

export interface BackendLimitState {
  /** Calls allowed in flight, fractional so that additive increase can add 1/limit. */
  limit: number;
  /** True until the provider first refuses a call for capacity. */
  slowStart: boolean;
  /** No new call before this instant (a provider's Retry-After); null = not paused. */
  pausedUntil: number | null;
  /** When the limit was last cut; refusals within one typical call of it are the same overshoot. */
  decreasedAt: number | null;
  /** The limit at the last capacity refusal: about the provider's capacity, plus one. */
  refusedAt: number | null;
  /**
   * Refusals in a row (apart from the first) that found the provider holding as many of our calls
   * as the one before: at least 1 = the ceiling is confirmed. Absent in states stored before it = 0.
   */
  ceilingConfirmations?: number;
  /** The pause (Retry-After, ms) the last capacity refusal asked for: what a probe costs. Absent = 0. */
  refusalPauseMs?: number;
  /** A moving average of successful calls' durations, in ms; null before the first. */
  typicalCallMs: number | null;
  /**
   * The circuit breaker (decision 0011): the backend refused us in a way no retry fixes (our key, the
   * project's billing, an exhausted quota). Until this instant no call is made and creates for its
   * models are refused; after it, one probe call decides. Null (or absent, in states stored before
   * it existed) = available.
   */
  unavailableUntil?: number | null;
}

/** What one upstream call came to, for the limit (docs/design.md §4: upstream calls by outcome). */
export type UpstreamOutcome =
  | { kind: 'ok'; durationMs: number }
  /** The provider had no capacity for it (429, RESOURCE_EXHAUSTED, overloaded 503). */
  | { kind: 'rate_limited'; retryAfterMs?: number }
  /** Failed for another reason worth retrying (timeout, 5xx, network). */
  | { kind: 'transient' }
  /** Failed for good (policy refusal, invalid request). */
  | { kind: 'permanent' }
  /** The backend cannot serve anyone until an operator acts or a quota resets (generator_unavailable, upstream_quota_exhausted). */
  | { kind: 'unavailable'; retryAfterMs?: number };

export type UpstreamOutcomeKind = UpstreamOutcome['kind'];

/** The backend's load when a call ends, read by the store in the same transaction. */
export interface BackendLoad {
  /** Its tasks in progress, the ending call's included. */
  inFlight: number;
  /** Whether runnable tasks of its models are waiting. */
  waiting: boolean;
}

export const UPSTREAM_OUTCOME_KINDS: readonly UpstreamOutcomeKind[] = [
  'ok',
  'rate_limited',
  'transient',
  'permanent',
  'unavailable',
];

/** The circuit breaker's state at `now`: available, unavailable (cooling down) or probing (one call allowed). */
export type BackendAvailability = 'available' | 'unavailable' | 'probing';
export const BACKEND_AVAILABILITIES: readonly BackendAvailability[] = ['available', 'unavailable', 'probing'];

export function backendAvailability(state: BackendLimitState, now: number): BackendAvailability {
  if (state.unavailableUntil === null || state.unavailableUntil === undefined) return 'available';
  return now < state.unavailableUntil ? 'unavailable' : 'probing';
}

const MIN_LIMIT = 1;
const DECREASE = 0.75;
/** How much slower the limit grows near the limit last refused: one probe per this many round trips. */
const PROBE_SLOWDOWN = 30;
/** A confirmed ceiling is probed at most once per this many of the pauses a refusal asks for. */
const PROBE_PAUSES = 50;
/** Weight of the newest call in the moving average of call durations. */
const DURATION_WEIGHT = 0.2;

export function initialBackendLimit(settings: BackendLimitSettings): BackendLimitState {
  return {
    limit: Math.max(MIN_LIMIT, Math.min(settings.initial, settings.max)),
    slowStart: true,
    pausedUntil: null,
    decreasedAt: null,
    refusedAt: null,
    typicalCallMs: null,
  };
}

/** Calls the backend admits at once now (the integer part of the limit). */
export function callsAllowed(state: BackendLimitState): number {
  return Math.max(MIN_LIMIT, Math.floor(state.limit));
}

/** Whether one more call may start now, with `inFlight` already running. */
export function admitsCall(state: BackendLimitState, inFlight: number, now: number): boolean {
  if (state.pausedUntil !== null && now < state.pausedUntil) return false;
  const availability = backendAvailability(state, now);
  if (availability === 'unavailable') return false;
  // After the cool-down, one call at a time until one succeeds: the probe.
  if (availability === 'probing') return inFlight < 1;
  return inFlight < callsAllowed(state);
}

/** The limit after one call's outcome. */
export function afterUpstreamCall(
  state: BackendLimitState,
  outcome: UpstreamOutcome,
  load: BackendLoad,
  now: number,
  settings: BackendLimitSettings,
): BackendLimitState {
  switch (outcome.kind) {
    case 'ok': {
      const typicalCallMs =
        state.typicalCallMs === null
          ? outcome.durationMs
          : state.typicalCallMs + DURATION_WEIGHT * (outcome.durationMs - state.typicalCallMs);
      // A success closes the circuit: the probe (or a call begun before it opened) went through.
      const available = { ...state, typicalCallMs, unavailableUntil: null };
      // Growing while the limit held nothing back would raise it without evidence the provider takes more.
      const saturated = load.waiting && load.inFlight >= callsAllowed(state);
      if (!saturated) return available;
      return { ...available, limit: Math.min(settings.max, state.limit + increaseStep(state)) };
    }
    case 'rate_limited': {
      const askedPauseMs = outcome.retryAfterMs !== undefined && outcome.retryAfterMs > 0 ? outcome.retryAfterMs : 0;
      const pausedUntil = askedPauseMs > 0 ? Math.max(state.pausedUntil ?? 0, now + askedPauseMs) : state.pausedUntil;
      // The provider refused with our other calls in flight: it takes at most that many (it may
      // serve others too). The refused call is itself among load.inFlight.
      const taken = load.inFlight >= 1 ? Math.max(MIN_LIMIT, load.inFlight - 1) : Number.POSITIVE_INFINITY;
      const window = state.typicalCallMs ?? 0;
      const sameOvershoot = state.decreasedAt !== null && now - state.decreasedAt < window;
      if (sameOvershoot) {
        // The other refusals of one overshoot narrow the estimate without cutting again.
        return {
          ...state,
          pausedUntil,
          limit: Math.min(state.limit, taken),
          refusedAt: Math.min(state.refusedAt ?? state.limit, taken + 1),
        };
      }
      const capacityHeld = load.inFlight >= 1 && (state.refusedAt === null || taken + 1 >= state.refusedAt);
      const cut = capacityHeld ? state.limit - 1 : Math.min(state.limit * DECREASE, state.limit - 1);
      const sameCeiling = capacityHeld && state.refusedAt !== null && taken + 1 < state.refusedAt + 1;
      return {
        ...state,
        pausedUntil,
        slowStart: false,
        decreasedAt: now,
        refusedAt: Math.min(state.limit, taken + 1),
        limit: Math.max(MIN_LIMIT, Math.min(cut, taken)),
        ceilingConfirmations: sameCeiling ? (state.ceilingConfirmations ?? 0) + 1 : 0,
        refusalPauseMs: askedPauseMs,
      };
    }
    case 'unavailable': {
      const coolDownMs = Math.max(settings.unavailableCooldownMs ?? UNAVAILABLE_COOLDOWN_MS, outcome.retryAfterMs ?? 0);
      return { ...state, unavailableUntil: Math.max(state.unavailableUntil ?? 0, now + coolDownMs) };
    }
    case 'transient':
    case 'permanent':
      // Not a statement about capacity: the limit stays where it is.
      return state;
  }
}

function increaseStep(state: BackendLimitState): number {
  if (state.slowStart || state.refusedAt === null) return 1;
  const nearRefused = state.limit >= state.refusedAt - 1 && state.limit < state.refusedAt + 1;
  if (!nearRefused) return 1 / state.limit;
  return 1 / (probeRounds(state) * state.limit);
}

/** Round trips between two probes of the ceiling last refused. */
function probeRounds(state: BackendLimitState): number {
  const confirmed = (state.ceilingConfirmations ?? 0) >= 1;
  if (!confirmed || !state.typicalCallMs || !state.refusalPauseMs) return PROBE_SLOWDOWN;
  return Math.max(PROBE_SLOWDOWN, (PROBE_PAUSES * state.refusalPauseMs) / state.typicalCallMs);
}
