# syntax=docker/dockerfile:1
# One image for every role of the service (docs/deploy.md): `serve` by default, or `api`, `worker`,
# `migrate`, `keys …`, `tokens …`, `config` as the command. Base: the official Node.js 24 image on
# Debian bookworm, slim; another (a company's own, a mirror) through --build-arg NODE_IMAGE=….
ARG NODE_IMAGE=node:24-bookworm-slim

# Production dependencies alone: their layer is rebuilt only when the lockfile changes.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Then what Node never loads: source maps, TypeScript sources and declarations, better-sqlite3's
# C sources and its binaries for other systems.
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \) -delete \
 && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
 && find node_modules/better-sqlite3/prebuilds -type f ! -name "linux-$(node -p process.arch).node" -delete

# The TypeScript compiled and the pages (Playground, console) bundled, with the development dependencies.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY schemas/ schemas/
COPY src/ src/
COPY clients/ clients/
COPY ui/ ui/
COPY playground/ playground/
COPY console/ console/
COPY scripts/build-pages.ts scripts/
RUN npm run build \
 && find dist -name '*.map' -delete \
 && chmod 755 dist/src/cli.js

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    DATA_DIR=/data \
    HOST=0.0.0.0 \
    PORT=3000 \
    WORKER_METRICS_PORT=9464 \
    SHUTDOWN_DELAY_MS=2000 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# A user of its own, numeric (runAsNonRoot can check it), owning nothing but /data.
RUN echo 'imagegen:x:10001:10001:imagegen:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'imagegen:x:10001:' >> /etc/group \
 && mkdir -p /data && chown 10001:10001 /data
COPY --from=deps /app/node_modules node_modules/
COPY --from=build /app/dist dist/
COPY package.json ./
COPY deploy/healthcheck.mjs deploy/
RUN ln -s /app/dist/src/cli.js /usr/local/bin/imagegen
USER 10001:10001
VOLUME ["/data"]
EXPOSE 3000 9464
# /healthz of the API (PORT) or, for a worker, of its metrics port; Node itself, no curl in the image.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/app/deploy/healthcheck.mjs"]
# Exec form: Node is PID 1 and gets SIGTERM itself; every long-running command drains on it.
ENTRYPOINT ["imagegen"]
CMD ["serve"]
