/**
 * The process that runs a loopback model provider for the dispatch scenario
 * (bench/lib/loopback-provider.ts starts it): test/helpers/capacity-provider.ts, and nothing else,
 * so that the moment a call arrives is read by a process that is not busy with the bench's own
 * client (in the bench's process, the create's 202 and the provider's call arrive together, and the
 * one read first delays the other by a few tenths of a millisecond). Each call's arrival is sent to
 * the parent on the bench's wall clock (bench/lib/wall-clock.ts), which both processes share.
 *
 * Messages (IPC): out `listening` (once), then `call` per call in the order they arrived.
 */
import { CapacityProvider, type CapacityProviderOptions } from '../../test/helpers/capacity-provider.js';
import { wallClock } from './wall-clock.js';

export type ProviderProcessMessage = { type: 'listening'; url: string } | { type: 'call'; receivedAt: number };

const options = JSON.parse(process.argv[2]) as CapacityProviderOptions;
const now = wallClock();
const provider = await CapacityProvider.start(options);
process.on('disconnect', () => void provider.close().then(() => process.exit(0)));
process.send?.({ type: 'listening', url: provider.url } satisfies ProviderProcessMessage);
for (let reported = 0; ; reported++) {
  await provider.received(reported + 1);
  // The provider read its high-resolution clock as the call arrived; on the wall clock that is as
  // far before now as performance.now() has moved since.
  const receivedAt = now() - (performance.now() - provider.calls[reported].receivedAtHighRes);
  process.send?.({ type: 'call', receivedAt } satisfies ProviderProcessMessage);
}
