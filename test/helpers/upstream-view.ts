import type { FakeReply, FakeUpstream, ReceivedRequest } from './fake-upstream.js';

/** What a test reads of a fake upstream and scripts on it (FakeUpstream itself, or a view of it). */
export interface UpstreamUnderTest {
  readonly requests: readonly ReceivedRequest[];
  readonly refused: readonly ReceivedRequest[];
  readonly abandoned: number;
  replyWith(...replies: FakeReply[]): void;
  received(count: number): Promise<void>;
  abandonedCount(count: number): Promise<void>;
}

/**
 * A fake upstream shared by a file's tests, as one test sees it: the requests, refusals and
 * abandoned calls from now on, counted from zero, as if the upstream had just started.
 */
export function upstreamFromHere(upstream: FakeUpstream): UpstreamUnderTest {
  const requests = upstream.requests.length;
  const refused = upstream.refused.length;
  const abandoned = upstream.abandoned;
  return {
    get requests() {
      return upstream.requests.slice(requests);
    },
    get refused() {
      return upstream.refused.slice(refused);
    },
    get abandoned() {
      return upstream.abandoned - abandoned;
    },
    replyWith: (...replies) => upstream.replyWith(...replies),
    received: (count) => upstream.received(requests + count),
    abandonedCount: (count) => upstream.abandonedCount(abandoned + count),
  };
}
