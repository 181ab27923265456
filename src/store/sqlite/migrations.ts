/**
 * Schema versions of the embedded store, applied in order; PRAGMA user_version records how far a
 * database has come. Never edit a released entry: append a new one.
 * Times are integer milliseconds since the epoch (sortable, compact, no time-zone parsing).
 */
export const SQLITE_MIGRATIONS: string[] = [
  `
  CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    balance INTEGER NOT NULL CHECK (balance >= 0),
    created_at INTEGER NOT NULL
  );

  CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
  );
  CREATE INDEX api_keys_account ON api_keys(account_id);

  CREATE TABLE ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'debit', 'refund')),
    amount INTEGER NOT NULL CHECK (amount > 0),
    balance_after INTEGER NOT NULL CHECK (balance_after >= 0),
    task_id TEXT,
    note TEXT,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX ledger_account ON ledger(account_id, id);
  -- A task is debited once and refunded at most once, whatever races happen above.
  CREATE UNIQUE INDEX ledger_task_once ON ledger(task_id, kind) WHERE task_id IS NOT NULL;

  CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    image_reference TEXT NOT NULL,
    aspect_ratio TEXT NOT NULL,
    resolution TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    cost INTEGER NOT NULL,
    webhook_url TEXT,
    generated TEXT NOT NULL,
    error_code TEXT,
    error_message TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    run_after INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    completed_at INTEGER
  );
  -- UUIDv7 ids sort by creation time, so (account_id, id) is the keyset for newest-first lists.
  CREATE INDEX tasks_account ON tasks(account_id, id);
  CREATE INDEX tasks_account_status ON tasks(account_id, status, id);
  CREATE INDEX tasks_account_model ON tasks(account_id, model, id);

  CREATE TABLE media (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    source TEXT NOT NULL CHECK (source IN ('upload', 'generated')),
    content_type TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    size_bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    blob_key TEXT NOT NULL,
    task_id TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  CREATE INDEX media_account ON media(account_id, id);
  CREATE INDEX media_expiry ON media(expires_at);
  `,
];
