import type { ReferencedMedia } from '../../core/task-admission.js';
import { withoutGeneratedMedia, type GeneratedMediaRef } from '../../core/task.js';
import type { MediaRecord, MediaSource, MediaStore } from '../port.js';
import { fromMedia, toMedia, type MediaRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';

/** Media rows and the blob-deletion queue on the embedded store. */
export class SqliteMedia implements MediaStore {
  constructor(private readonly db: SqliteDatabase) {}

  async scheduleBlobDeletion(blobKey: string, dueAt: Date): Promise<void> {
    queueBlobDeletion(this.db, blobKey, dueAt);
  }

  async insertMedia(media: MediaRecord, now: Date): Promise<boolean> {
    return this.db.groupCommit(() => insertMediaIn(this.db, media, now), { durable: true });
  }

  async getMedia(accountId: string, mediaId: string, now: Date): Promise<MediaRecord | null> {
    const row = this.db
      .statement('SELECT * FROM media WHERE id = ? AND account_id = ? AND expires_at > ?')
      .get(mediaId, accountId, now.getTime()) as MediaRow | undefined;
    return row ? toMedia(row) : null;
  }

  async getMediaById(mediaId: string, now: Date): Promise<MediaRecord | null> {
    const row = this.db.statement('SELECT * FROM media WHERE id = ? AND expires_at > ?').get(mediaId, now.getTime()) as
      | MediaRow
      | undefined;
    return row ? toMedia(row) : null;
  }

  async deleteMedia(accountId: string, mediaId: string, now: Date): Promise<string | null> {
    return this.db.groupCommit(
      () => {
        const row = this.db
          .statement('DELETE FROM media WHERE id = ? AND account_id = ? AND expires_at > ? RETURNING blob_key, task_id')
          .get(mediaId, accountId, now.getTime()) as { blob_key: string; task_id: string | null } | undefined;
        if (!row) return null;
        this.forgetDeleted(mediaId, row.blob_key, row.task_id, now);
        return row.blob_key;
      },
      { durable: true },
    );
  }

  async deleteExpiredMedia(now: Date, limit: number): Promise<number> {
    return this.db.write(() => {
      const rows = this.db
        .statement(
          `DELETE FROM media WHERE id IN (SELECT id FROM media WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)
             RETURNING id, blob_key, task_id`,
        )
        .all(now.getTime(), limit) as { id: string; blob_key: string; task_id: string | null }[];
      for (const row of rows) this.forgetDeleted(row.id, row.blob_key, row.task_id, now);
      return rows.length;
    });
  }

  /** What a deleted media row leaves behind: its blob, queued for deletion now, and its place in its task. */
  private forgetDeleted(mediaId: string, blobKey: string, taskId: string | null, now: Date): void {
    queueBlobDeletion(this.db, blobKey, now);
    if (!taskId) return;
    const task = this.db.statement('SELECT generated FROM tasks WHERE id = ?').get(taskId) as
      | { generated: string }
      | undefined;
    const kept = task && withoutGeneratedMedia(JSON.parse(task.generated) as GeneratedMediaRef[], mediaId);
    if (kept) this.db.statement('UPDATE tasks SET generated = ? WHERE id = ?').run(JSON.stringify(kept), taskId);
  }

  async listDueBlobDeletions(now: Date, limit: number): Promise<string[]> {
    const rows = this.db
      .statement('SELECT blob_key FROM blob_deletions WHERE due_at <= ? ORDER BY due_at LIMIT ?')
      .all(now.getTime(), limit) as { blob_key: string }[];
    return rows.map((r) => r.blob_key);
  }

  async completeBlobDeletion(blobKey: string, now: Date): Promise<void> {
    // Bookkeeping: if a power cut undoes it, the blob's deletion is simply done again (deleting a
    // missing blob succeeds). As an autocommit it was a sync per blob on the event loop.
    await this.db.groupCommit(
      () => {
        this.db.statement('DELETE FROM blob_deletions WHERE blob_key = ? AND due_at <= ?').run(blobKey, now.getTime());
      },
      { durable: false },
    );
  }

  async mediaBlobKeys(accountId: string, mediaIds: string[]): Promise<Map<string, string>> {
    if (mediaIds.length === 0) return new Map();
    const rows = this.db
      .statement(
        `SELECT id, blob_key FROM media WHERE account_id = ? AND id IN (${mediaIds.map(() => '?').join(', ')})`,
      )
      .all(accountId, ...mediaIds) as { id: string; blob_key: string }[];
    return new Map(rows.map((r) => [r.id, r.blob_key]));
  }
}

function queueBlobDeletion(db: SqliteDatabase, blobKey: string, dueAt: Date): void {
  db.statement(
    'INSERT INTO blob_deletions (blob_key, due_at) VALUES (?, ?) ON CONFLICT (blob_key) DO UPDATE SET due_at = excluded.due_at',
  ).run(blobKey, dueAt.getTime());
}

/** Takes back the blob's reservation and inserts the row; false (nothing written) without a live reservation. */
export function insertMediaIn(db: SqliteDatabase, media: MediaRecord, now: Date): boolean {
  const reserved = db
    .statement('DELETE FROM blob_deletions WHERE blob_key = ? AND due_at > ?')
    .run(media.blobKey, now.getTime());
  if (reserved.changes === 0) return false;
  db.statement(
    `INSERT INTO media (id, account_id, source, content_type, width, height, size_bytes, sha256, blob_key, task_id, created_at, expires_at)
       VALUES (@id, @account_id, @source, @content_type, @width, @height, @size_bytes, @sha256, @blob_key, @task_id, @created_at, @expires_at)`,
  ).run(fromMedia(media));
  return true;
}

/** The account's media that `mediaIds` name, as an admission reads them (core admitTasks decides which are usable). */
export function referencedMediaIn(
  db: SqliteDatabase,
  accountId: string,
  mediaIds: readonly string[],
): ReferencedMedia[] {
  if (mediaIds.length === 0) return [];
  const rows = db
    .statement(
      `SELECT id, source, expires_at FROM media WHERE account_id = ? AND id IN (${mediaIds.map(() => '?').join(', ')})`,
    )
    .all(accountId, ...mediaIds) as { id: string; source: MediaSource; expires_at: number }[];
  return rows.map((row) => ({ id: row.id, source: row.source, expiresAt: new Date(row.expires_at) }));
}
