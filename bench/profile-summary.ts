/**
 * Top functions of a V8 CPU profile (`node --cpu-prof`, e.g. from `npm run bench -- --profile`):
 * self time and inclusive time, as shares of the sampled time.
 *
 *   npx tsx bench/profile-summary.ts bench/results/profiles/service-api.cpuprofile [top=30] [filter]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg, filter] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [top] [filter]');
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Time per node from the samples (timeDeltas[i] is the time before sample i).
const selfTime = new Map<number, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
// Shares are of the busy time: idle samples (waiting for I/O, or between load rounds) are left out.
for (const n of profile.nodes) if (n.callFrame.functionName === '(idle)') selfTime.delete(n.id);
const total = [...selfTime.values()].reduce((a, b) => a + b, 0);

const label = (n: ProfileNode) => {
  const url = n.callFrame.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, 'nm:').replace(/.*\/work\/main\//, '');
  return `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
};

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, time] of selfTime) {
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + time);
  // Inclusive: count each distinct label once per stack.
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur)!);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + time);
  }
}

const show = (title: string, map: Map<string, number>) => {
  console.log(`\n${title} (shares of ${(total / 1e6).toFixed(1)} s busy)`);
  const rows = [...map.entries()].filter(([l]) => !filter || l.includes(filter)).sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [l, t] of rows) console.log(`${((t / total) * 100).toFixed(1).padStart(6)} %  ${l}`);
};
show('self', self);
show('inclusive', inclusive);
