import type { ReferencedMedia } from '../../core/task-admission.js';
import { withoutGeneratedMedia, type GeneratedMediaRef } from '../../core/task.js';
import type { MediaRecord, MediaSource, MediaStore } from '../port.js';
import { prepared, type PostgresDatabase, type Queryable, type Tx } from './postgres-database.js';
import { mediaValues, toMedia, type MediaRow } from './rows.js';

/** Media rows and the blob-deletion queue on PostgreSQL. */
export class PostgresMedia implements MediaStore {
  constructor(private readonly db: PostgresDatabase) {}

  async scheduleBlobDeletion(blobKey: string, dueAt: Date): Promise<void> {
    await queueBlobDeletion(this.db, blobKey, dueAt);
  }

  async insertMedia(media: MediaRecord, now: Date): Promise<boolean> {
    return this.db.transaction((tx) => insertMediaIn(tx, media, now));
  }

  async getMedia(accountId: string, mediaId: string, now: Date): Promise<MediaRecord | null> {
    const { rows } = await this.db.query<MediaRow>(
      'SELECT * FROM media WHERE id = $1 AND account_id = $2 AND expires_at > $3',
      [mediaId, accountId, now],
    );
    return rows[0] ? toMedia(rows[0]) : null;
  }

  async getMediaById(mediaId: string, now: Date): Promise<MediaRecord | null> {
    const { rows } = await this.db.query<MediaRow>('SELECT * FROM media WHERE id = $1 AND expires_at > $2', [
      mediaId,
      now,
    ]);
    return rows[0] ? toMedia(rows[0]) : null;
  }

  async deleteMedia(accountId: string, mediaId: string, now: Date): Promise<string | null> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ blob_key: string; task_id: string | null }>(
        'DELETE FROM media WHERE id = $1 AND account_id = $2 AND expires_at > $3 RETURNING blob_key, task_id',
        [mediaId, accountId, now],
      );
      if (!rows[0]) return null;
      await forgetDeleted(tx, mediaId, rows[0].blob_key, rows[0].task_id, now);
      return rows[0].blob_key;
    });
  }

  async deleteExpiredMedia(now: Date, limit: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string; blob_key: string; task_id: string | null }>(
        `DELETE FROM media WHERE id IN (SELECT id FROM media WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id, blob_key, task_id`,
        [now, limit],
      );
      for (const row of rows) await forgetDeleted(tx, row.id, row.blob_key, row.task_id, now);
      return rows.length;
    });
  }

  async listDueBlobDeletions(now: Date, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ blob_key: string }>(
      'SELECT blob_key FROM blob_deletions WHERE due_at <= $1 ORDER BY due_at, blob_key LIMIT $2',
      [now, limit],
    );
    return rows.map((r) => r.blob_key);
  }

  async completeBlobDeletion(blobKey: string, now: Date): Promise<void> {
    await this.db.query('DELETE FROM blob_deletions WHERE blob_key = $1 AND due_at <= $2', [blobKey, now]);
  }

  async mediaBlobKeys(accountId: string, mediaIds: string[]): Promise<Map<string, string>> {
    if (mediaIds.length === 0) return new Map();
    const { rows } = await this.db.query<{ id: string; blob_key: string }>(
      'SELECT id, blob_key FROM media WHERE account_id = $1 AND id = ANY($2::text[])',
      [accountId, mediaIds],
    );
    return new Map(rows.map((r) => [r.id, r.blob_key]));
  }
}

/** What a deleted media row leaves behind: its blob, queued for deletion now, and its place in its task. */
async function forgetDeleted(tx: Tx, mediaId: string, blobKey: string, taskId: string | null, now: Date) {
  await queueBlobDeletion(tx, blobKey, now);
  if (!taskId) return;
  const { rows } = await tx.query<{ generated: GeneratedMediaRef[] }>(
    'SELECT generated FROM tasks WHERE id = $1 FOR UPDATE',
    [taskId],
  );
  const kept = rows[0] && withoutGeneratedMedia(rows[0].generated, mediaId);
  if (kept) await tx.query('UPDATE tasks SET generated = $2::json WHERE id = $1', [taskId, JSON.stringify(kept)]);
}

async function queueBlobDeletion(db: Queryable, blobKey: string, dueAt: Date): Promise<void> {
  // Prepared: a worker reserves every result's blob with it.
  await db.query(
    prepared(
      'queue-blob-deletion',
      'INSERT INTO blob_deletions (blob_key, due_at) VALUES ($1, $2) ON CONFLICT (blob_key) DO UPDATE SET due_at = excluded.due_at',
      [blobKey, dueAt],
    ),
  );
}

/** Takes back the blob's reservation and inserts the row; false (nothing written) without a live reservation. */
export async function insertMediaIn(tx: Tx, media: MediaRecord, now: Date): Promise<boolean> {
  // One statement: the reservation taken (deleted) and the row written only if it was there.
  const inserted = await tx.query(
    prepared(
      'insert-reserved-media',
      `WITH reserved AS (DELETE FROM blob_deletions WHERE blob_key = $9 AND due_at > $13 RETURNING 1)
       INSERT INTO media (id, account_id, source, content_type, width, height, size_bytes, sha256, blob_key, task_id, created_at, expires_at)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 WHERE EXISTS (SELECT 1 FROM reserved)`,
      [...mediaValues(media), now],
    ),
  );
  return inserted.rowCount === 1;
}

/**
 * The account's media that `mediaIds` name, as an admission reads them (core admitTasks decides
 * which are usable). FOR SHARE: a delete of one of them waits for the admitting transaction, or it
 * sees it gone.
 */
export async function referencedMediaIn(
  tx: Tx,
  accountId: string,
  mediaIds: readonly string[],
): Promise<ReferencedMedia[]> {
  if (mediaIds.length === 0) return [];
  const { rows } = await tx.query<{ id: string; source: MediaSource; expires_at: Date }>(
    'SELECT id, source, expires_at FROM media WHERE account_id = $1 AND id = ANY($2::text[]) FOR SHARE',
    [accountId, mediaIds],
  );
  return rows.map((row) => ({ id: row.id, source: row.source, expiresAt: row.expires_at }));
}
