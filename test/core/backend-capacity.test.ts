import t from 'tap';
import {
  backendAvailability,
  UNAVAILABLE_COOLDOWN_MS,
  admitsCall,
  afterUpstreamCall,
  callsAllowed,
  initialBackendLimit,
  type BackendLimitState,
  type UpstreamOutcome,
} from '../../src/core/backend-capacity.js';

const settings = { initial: 4, max: 64 };
const ok = { kind: 'ok' as const, durationMs: 500 };
/** A backend whose limit is full with work waiting, or one with room to spare. */
const full = (state: BackendLimitState) => ({ inFlight: callsAllowed(state), waiting: true });
const idle = { inFlight: 0, waiting: false };
/** A refused call beyond a full limit: the limit's calls and the refused one in flight. */
const overFull = (state: BackendLimitState) => ({ inFlight: callsAllowed(state) + 1, waiting: true });
const step = (state: BackendLimitState, outcome: UpstreamOutcome, now: number, s = settings) =>
  afterUpstreamCall(
    state,
    outcome,
    outcome.kind === 'ok' ? full(state) : outcome.kind === 'rate_limited' ? overFull(state) : idle,
    now,
    s,
  );

/** A capacity refusal with `inFlight` of our calls in flight, the refused one included. */
const refusal = (state: BackendLimitState, inFlight: number, now: number, retryAfterMs?: number) =>
  afterUpstreamCall(state, { kind: 'rate_limited', retryAfterMs }, { inFlight, waiting: true }, now, settings);

t.test('the limit starts at its initial value, never above the ceiling', async (t) => {
  t.equal(callsAllowed(initialBackendLimit(settings)), 4);
  t.equal(callsAllowed(initialBackendLimit({ initial: 4, max: 2 })), 2);
});

t.test('slow start adds one per successful call that found the limit full, until the first refusal', async (t) => {
  let state = initialBackendLimit(settings);
  for (let i = 0; i < 4; i++) state = step(state, ok, 1000 + i);
  t.equal(callsAllowed(state), 8, 'doubled in one round of calls');
  state = afterUpstreamCall(state, ok, { inFlight: 3, waiting: true }, 2000, settings);
  t.equal(callsAllowed(state), 8, 'a call made with room to spare proves nothing');
  state = afterUpstreamCall(state, ok, { inFlight: 8, waiting: false }, 2000, settings);
  t.equal(callsAllowed(state), 8, 'nor one with nothing waiting for the backend');
});

t.test(
  'a capacity refusal lands the limit on what the provider held, once per overshoot, and ends slow start',
  async (t) => {
    let state: BackendLimitState = { ...initialBackendLimit(settings), limit: 16, typicalCallMs: 500 };
    state = refusal(state, 13, 10_000);
    t.equal(state.limit, 12, 'twelve others were in flight');
    t.equal(state.refusedAt, 13);
    t.equal(state.slowStart, false);
    state = refusal(state, 13, 10_100);
    t.equal(state.limit, 12, 'refusals of the same overshoot (within one typical call) cut once');
    // Slow start that passed the provider's capacity by one call lands on it too, not a quarter below.
    const byOne = refusal({ ...initialBackendLimit(settings), limit: 9, typicalCallMs: 500 }, 9, 10_000);
    t.equal(byOne.limit, 8);
  },
);

t.test(
  'a capacity refusal cuts by a quarter when the provider held fewer of our calls than before, or none',
  async (t) => {
    let state: BackendLimitState = { ...initialBackendLimit(settings), limit: 12, slowStart: false, refusedAt: 13 };
    state = refusal(state, 11, 10_000);
    t.equal(state.limit, 9, 'ten held where twelve were: three quarters of twelve');
    const none = refusal({ ...initialBackendLimit(settings), limit: 8 }, 0, 10_000);
    t.equal(none.limit, 6, 'refused with none of ours in flight: a quarter off');
  },
);

t.test('after a refusal the limit grows one per round of calls, slowly near the refused limit', async (t) => {
  const after = (limit: number, refusedAt: number) => {
    let state: BackendLimitState = { ...initialBackendLimit(settings), limit, slowStart: false, refusedAt };
    for (let i = 0; i < limit; i++) state = step(state, ok, i);
    return state.limit - limit;
  };
  const belowRefused = after(6, 12);
  t.ok(belowRefused > 0.9 && belowRefused < 1, `6 calls at 6, refused at 12: +${belowRefused}`);
  const nearRefused = after(8, 9);
  t.ok(nearRefused > 0.03 && nearRefused < 0.04, `8 calls at 8, refused at 9: +${nearRefused}`);
  const pastRefused = after(11, 9);
  t.ok(pastRefused > 0.9 && pastRefused < 1, `11 calls at 11, refused at 9: +${pastRefused}`);
});

t.test('the limit never passes the ceiling nor falls below one', async (t) => {
  let state: BackendLimitState = { ...initialBackendLimit({ initial: 4, max: 5 }) };
  for (let i = 0; i < 20; i++) state = step(state, ok, i, { initial: 4, max: 5 });
  t.equal(state.limit, 5);
  state = { ...state, limit: 1, slowStart: false, typicalCallMs: null };
  state = step(state, { kind: 'rate_limited' }, 100);
  t.equal(callsAllowed(state), 1);
});

t.test("a provider's Retry-After pauses new calls, without shortening a longer pause", async (t) => {
  let state = step(initialBackendLimit(settings), { kind: 'rate_limited', retryAfterMs: 2000 }, 1000);
  t.equal(state.pausedUntil, 3000);
  t.notOk(admitsCall(state, 0, 2999));
  t.ok(admitsCall(state, 0, 3000));
  state = step(state, { kind: 'rate_limited', retryAfterMs: 500 }, 1100);
  t.equal(state.pausedUntil, 3000);
});

t.test('a refusal brings the limit down to the calls the provider was holding for us at most', async (t) => {
  // Slow start doubled to 12 in one round trip against a provider that holds 6.
  let state: BackendLimitState = { ...initialBackendLimit(settings), limit: 12, typicalCallMs: 500 };
  state = refusal(state, 9, 1000);
  t.equal(state.limit, 8, 'eight others were in flight');
  state = refusal(state, 7, 1001);
  t.equal(state.limit, 6, 'a later refusal of the same overshoot narrows it');
  t.equal(state.refusedAt, 7);
  t.equal(state.decreasedAt, 1000, 'without counting as a new cut');
});

t.test('a refused probe of a known ceiling puts the limit back on it, without a cut', async (t) => {
  // Refused at 9 with 8 others in flight: the provider takes 8.
  const atCeiling: BackendLimitState = {
    ...initialBackendLimit(settings),
    limit: 9,
    slowStart: false,
    refusedAt: 9,
    decreasedAt: 0,
    typicalCallMs: 500,
  };
  const probed = refusal(atCeiling, 9, 60_000);
  t.equal(probed.limit, 8, 'back to the eight the provider still held');
  t.equal(probed.refusedAt, 9);
  // The provider took fewer than before: its capacity moved, and the cut is multiplicative again.
  const shrunk = refusal(atCeiling, 7, 60_000);
  t.equal(shrunk.limit, 6, 'the six it held, below three quarters of nine');
  const lower = refusal({ ...atCeiling, limit: 12, refusedAt: 14 }, 12, 60_000);
  t.equal(lower.limit, 9, 'a quarter off when it held eleven, where it held thirteen before');
});

t.test('two refusals in a row at the same held count confirm the ceiling; another count does not', async (t) => {
  const refuse = (state: BackendLimitState, inFlight: number, now: number) => refusal(state, inFlight, now, 60_000);
  const base: BackendLimitState = { ...initialBackendLimit(settings), limit: 9, typicalCallMs: 20_000 };
  const first = refuse(base, 9, 0);
  t.equal(first.ceilingConfirmations, 0, 'slow start ends: one refusal confirms nothing');
  t.equal(first.refusalPauseMs, 60_000, 'the pause it asked for is kept: what a probe costs');
  const probed = refuse({ ...first, limit: 9 }, 9, 600_000);
  t.equal(probed.ceilingConfirmations, 1, 'the probe of 9 refused with 8 held again: confirmed');
  t.equal(probed.limit, 8);
  // A ceiling found one too low (a call that ended just before the refusal was recorded was missed):
  // the probe above it is refused with more held, which confirms nothing.
  const tooLow = refuse(base, 8, 0);
  t.equal(tooLow.refusedAt, 8);
  const above = refuse({ ...tooLow, limit: 9 }, 9, 600_000);
  t.equal(above.ceilingConfirmations, 0, 'eight held where seven were: not the same ceiling');
  t.equal(above.limit, 8);
  const fewer = refuse({ ...probed, limit: 9 }, 8, 1_200_000);
  t.equal(fewer.ceilingConfirmations, 0, 'fewer held than before: the capacity moved');
});

t.test(
  'a confirmed ceiling is probed once per 50 of the pauses a refusal asks for, at least 30 round trips',
  async (t) => {
    const roundsToProbe = (start: BackendLimitState) => {
      let state = start;
      let calls = 0;
      while (callsAllowed(state) < 9) {
        state = step(state, { kind: 'ok', durationMs: 20_000 }, calls);
        calls += 1;
      }
      return calls / 8;
    };
    const nearCeiling: BackendLimitState = {
      ...initialBackendLimit(settings),
      limit: 8,
      slowStart: false,
      refusedAt: 9,
      typicalCallMs: 20_000,
      refusalPauseMs: 60_000,
    };
    // Round trips of eight calls; the step is per call over the limit, which grows from 8 to 9 meanwhile.
    const within = (value: number, low: number) => value >= low && value <= low * (9 / 8);
    const unconfirmed = roundsToProbe({ ...nearCeiling, ceilingConfirmations: 0 });
    t.ok(within(unconfirmed, 30), `not confirmed: 30 round trips (${unconfirmed})`);
    const confirmed = roundsToProbe({ ...nearCeiling, ceilingConfirmations: 1 });
    t.ok(within(confirmed, 150), `confirmed, 60 s pauses of 20 s calls: 50 pauses, 150 round trips (${confirmed})`);
    const shortPause = roundsToProbe({ ...nearCeiling, ceilingConfirmations: 1, refusalPauseMs: 1_000 });
    t.ok(within(shortPause, 30), `confirmed, 1 s pauses: still 30 round trips (${shortPause})`);
    const stored = roundsToProbe({ ...nearCeiling, ceilingConfirmations: undefined, refusalPauseMs: undefined });
    t.ok(within(stored, 30), `a state stored before confirmations: 30 round trips (${stored})`);
  },
);

t.test('other failures say nothing about capacity', async (t) => {
  const state = initialBackendLimit(settings);
  t.same(step(state, { kind: 'transient' }, 1), state);
  t.same(step(state, { kind: 'permanent' }, 1), state);
});

/**
 * A provider that takes C calls at once, each lasting L, and refuses any beyond them at once (with
 * a Retry-After of `retryAfterMs` when given); a backlog of work always waiting. Event-driven,
 * deterministic.
 */
function simulate(capacity: number, latencyMs: number, calls: number, retryAfterMs?: number) {
  const settings = { initial: 4, max: 1024 };
  let state = initialBackendLimit(settings);
  const running: number[] = []; // end times of accepted calls
  const refusedAt: number[] = [];
  let now = 0;
  let done = 0;
  while (done < calls) {
    // Start calls while the limit admits them.
    while (admitsCall(state, running.length, now) && done + running.length < calls) {
      if (running.length >= capacity) {
        refusedAt.push(now);
        state = afterUpstreamCall(
          state,
          { kind: 'rate_limited', retryAfterMs },
          { inFlight: running.length + 1, waiting: true },
          now,
          settings,
        );
        continue;
      }
      running.push(now + latencyMs);
    }
    running.sort((a, b) => a - b);
    if (running.length === 0) {
      // Paused with nothing in flight: the next event is the pause's end.
      now = state.pausedUntil!;
      continue;
    }
    now = running.shift()!;
    done += 1;
    // The backlog always waits; the ending call is still in flight when its outcome is recorded.
    const answered = { kind: 'ok' as const, durationMs: latencyMs };
    state = afterUpstreamCall(state, answered, { inFlight: running.length + 1, waiting: true }, now, settings);
  }
  return { makespan: now, refused: refusedAt.length, refusedAt };
}

t.test('against a provider of fixed capacity the limit converges: near its throughput, few refusals', async (t) => {
  // Slow start costs about log2(C / initial) round trips once: a run of 50 rounds absorbs it up to C = 40.
  for (const capacity of [2, 3, 8, 40]) {
    const calls = 50 * capacity;
    const { makespan, refused } = simulate(capacity, 500, calls);
    const ideal = (calls * 500) / capacity;
    t.ok(makespan <= ideal * 1.15, `C=${capacity}: makespan ${makespan} ms vs ideal ${ideal}`);
    t.ok(refused <= calls * 0.1, `C=${capacity}: ${refused} refusals for ${calls} calls`);
  }
});

t.test(
  'against a provider that asks for a pause with each refusal, its ceiling is probed rarely once confirmed',
  async (t) => {
    // docs/design.md §5's capacity scenario: C = 8, L = 500 ms, a 1 s RetryInfo with every refusal.
    // Slow start's overshoot lands on 8; the first probe of 9 (after 30 round trips) confirms the
    // ceiling and puts the limit back on 8; the next comes 50 pauses (100 round trips) later.
    const { makespan, refusedAt } = simulate(8, 500, 400, 1000);
    const ideal = (400 * 500) / 8;
    t.ok(makespan <= ideal * 1.08, `makespan ${makespan} ms vs ideal ${ideal}, refusals at ${refusedAt.join(', ')} ms`);
    t.ok(refusedAt.length <= 2, 'the overshoot and one probe');
    const long = simulate(8, 500, 8 * 2 * 300, 1000); // 300 s of work
    const probes = long.refusedAt.filter((at) => at > 20_000);
    t.ok(probes.length >= 4 && probes.length <= 6, `probes after the first, one per 50 s: ${probes.join(', ')}`);
    t.ok(long.makespan <= 300_000 * 1.03, `makespan ${long.makespan} ms vs ideal 300000`);
  },
);

t.test(
  'a provider whose pauses are longer than its calls is probed rarely once its ceiling is confirmed',
  async (t) => {
    // 20 s calls, 60 s RetryInfo, four hours of work: a probe every 30 round trips (10 min) would
    // idle every slot for up to a minute each time, about 7 % of the provider's capacity.
    for (const capacity of [4, 8, 16]) {
      const calls = ((4 * 3_600_000) / 20_000) * capacity;
      const { makespan, refused } = simulate(capacity, 20_000, calls, 60_000);
      t.ok(makespan <= 4 * 3_600_000 * 1.035, `C=${capacity}: makespan ${makespan} ms vs ideal ${4 * 3_600_000}`);
      t.ok(refused <= 10, `C=${capacity}: ${refused} refusals in four hours`);
    }
  },
);

t.test('circuit breaker: an unavailable backend takes no call until its cool-down, then one probe', async (t) => {
  const cooling = { ...settings, unavailableCooldownMs: 60_000 };
  const start = initialBackendLimit(cooling);
  t.equal(backendAvailability(start, 0), 'available');
  t.equal(backendAvailability({ ...start, unavailableUntil: undefined }, 0), 'available', 'a state stored before it');

  const open = afterUpstreamCall(start, { kind: 'unavailable' }, idle, 1000, cooling);
  t.equal(open.unavailableUntil, 61_000);
  t.equal(open.limit, start.limit, 'the limit is not a statement about it');
  t.equal(backendAvailability(open, 60_999), 'unavailable');
  t.notOk(admitsCall(open, 0, 60_999), 'no call while open');
  t.equal(backendAvailability(open, 61_000), 'probing');
  t.ok(admitsCall(open, 0, 61_000), 'one probe');
  t.notOk(admitsCall(open, 1, 61_000), 'one at a time');

  const longer = afterUpstreamCall(start, { kind: 'unavailable', retryAfterMs: 3_600_000 }, idle, 0, cooling);
  t.equal(longer.unavailableUntil, 3_600_000, "the provider's wait when longer than the cool-down");

  const again = afterUpstreamCall(open, { kind: 'unavailable' }, idle, 61_500, cooling);
  t.equal(again.unavailableUntil, 121_500, 'a failed probe opens it again');
  const closed = afterUpstreamCall(open, ok, idle, 61_500, cooling);
  t.equal(closed.unavailableUntil, null, 'a success closes it');
  t.equal(backendAvailability(closed, 61_500), 'available');
  t.equal(
    afterUpstreamCall(start, { kind: 'unavailable' }, idle, 0, settings).unavailableUntil,
    UNAVAILABLE_COOLDOWN_MS,
    'the default cool-down',
  );
});
