import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { BlobStore } from './blobs/port.js';
import { s3KeyPrefix, sqlitePath, type Config } from './config.js';
import type { Redis } from 'ioredis';
import { loadOrCreateSecret } from './secrets.js';
import { TaskEvents } from './services/task-events.js';
import type { Store } from './store/port.js';
import type { PostgresStore } from './store/postgres/postgres-store.js';

/*
 * Each adapter's module is imported when configuration selects it: a process on SQLite and the
 * file system loads neither the PostgreSQL client nor the AWS SDK (nor, without REDIS_URL, ioredis).
 */

/** The adapters a process runs on, chosen from configuration. */
export interface Runtime {
  store: Store;
  blobs: BlobStore;
  mediaSigningSecret: string;
  /** Task signals: this process's own, and on PostgreSQL those of every other process too. */
  events: TaskEvents;
  close(): Promise<void>;
}

/**
 * @param longRunning serve and worker: checkpoints move to a thread of their own. A one-shot CLI
 * command makes a handful of commits and needs no thread.
 */
export async function openStore(config: Config, options: { longRunning?: boolean } = {}): Promise<Store> {
  if (config.DATABASE_URL) {
    const { PostgresStore } = await import('./store/postgres/postgres-store.js');
    return new PostgresStore({ connectionString: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE });
  }
  const { SqliteStore } = await import('./store/sqlite/sqlite-store.js');
  fs.mkdirSync(config.DATA_DIR, { recursive: true });
  return new SqliteStore(sqlitePath(config), {
    checkpointInBackground: options.longRunning
      ? { onCheckpointError: (message) => process.emitWarning(`SQLite checkpoint failed: ${message}`) }
      : undefined,
  });
}

/** The bucket is not created here: it is provisioned with its region, access policy and lifecycle. */
export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (config.BLOB_STORE === 's3') {
    const { createS3Client, S3BlobStore } = await import('./blobs/s3-blob-store.js');
    const client = createS3Client({
      // loadConfig has refused BLOB_STORE=s3 without them.
      region: config.S3_REGION!,
      endpoint: config.S3_ENDPOINT,
      forcePathStyle: config.S3_FORCE_PATH_STYLE,
    });
    return new S3BlobStore({ client, bucket: config.S3_BUCKET!, prefix: s3KeyPrefix(config) });
  }
  const { FsBlobStore } = await import('./blobs/fs-blob-store.js');
  return new FsBlobStore(path.join(config.DATA_DIR, 'blobs'));
}

/**
 * The media signing secret when MEDIA_SIGNING_SECRET is unset. Every API process must sign and
 * check URLs with the same one: on PostgreSQL it is kept in the database, which every process of
 * a cluster shares; the embedded default keeps it in DATA_DIR, which its processes share.
 */
async function mediaSigningSecret(config: Config, store: Store): Promise<string> {
  if (config.MEDIA_SIGNING_SECRET) return config.MEDIA_SIGNING_SECRET;
  if (isPostgres(store)) return store.sharedSecret('media-signing-secret', () => randomBytes(32).toString('base64url'));
  return loadOrCreateSecret(config.DATA_DIR, 'media-signing-secret');
}

function isPostgres(store: Store): store is PostgresStore {
  return store.kind === 'postgres';
}

export async function openRuntime(config: Config, options: { longRunning?: boolean } = {}): Promise<Runtime> {
  const store = await openStore(config, options);
  try {
    await store.migrate();
    const events = new TaskEvents();
    // Long-running processes on PostgreSQL hear the other processes' tasks at once (LISTEN/NOTIFY):
    // idle workers wake on a create, long-polls and cancel-aborts on a change made anywhere.
    if (options.longRunning && isPostgres(store)) {
      await store.listen((signal) =>
        signal.kind === 'created' ? events.taskCreated(signal.model) : events.taskChanged(signal.taskId),
      );
    }
    const signingSecret = await mediaSigningSecret(config, store);
    const blobs = await openBlobStore(config);
    return {
      store,
      blobs,
      mediaSigningSecret: signingSecret,
      events,
      close: async () => {
        blobs.close?.();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * The rate-limit counters an API process shares with the others: a connection to REDIS_URL when
 * it is set (the start stops, naming the variable, when Redis does not answer), else null (counted
 * in process memory). A worker counts nothing and opens none. The opener closes it.
 */
export async function openRateLimitCounters(config: Config, onError: (err: Error) => void): Promise<Redis | null> {
  if (!config.REDIS_URL) return null;
  const { connectRateLimitRedis } = await import('./http/plugins/rate-limit.js');
  return connectRateLimitRedis(config.REDIS_URL, onError);
}

export async function closeRateLimitCounters(redis: Redis | null): Promise<void> {
  await redis?.quit().catch(() => redis.disconnect());
}
