// The image's HEALTHCHECK: 200 from /healthz of the API (PORT) or, in a worker, of its metrics port
// (WORKER_METRICS_PORT). Liveness only: /readyz is the orchestrator's to ask.
const host = ['0.0.0.0', '::', ''].includes(process.env.HOST ?? '') ? '127.0.0.1' : process.env.HOST;
const ports = [process.env.PORT ?? '3000', process.env.WORKER_METRICS_PORT ?? '9464'];
const hostPart = host.includes(':') ? `[${host}]` : host;
for (const port of ports) {
  try {
    const response = await fetch(`http://${hostPart}:${port}/healthz`, { signal: AbortSignal.timeout(4000) });
    if (response.ok) process.exit(0);
  } catch {
    // Not this port: the other role's.
  }
}
process.exit(1);
