import { monitorEventLoopDelay } from 'node:perf_hooks';
import { appendFileSync } from 'node:fs';
const h = monitorEventLoopDelay({ resolution: 1 });
h.enable();
let gcCount = 0;
setInterval(() => {
  appendFileSync('/tmp/loopdelay.log', `${process.pid} p50=${(h.percentile(50) / 1e6).toFixed(1)} p99=${(h.percentile(99) / 1e6).toFixed(1)} max=${(h.max / 1e6).toFixed(1)} n=${h.count}\n`);
  h.reset();
}, 1000).unref();
