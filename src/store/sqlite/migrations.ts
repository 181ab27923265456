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
  -- The worker claims the oldest runnable task; expired leases are found by this index too.
  CREATE INDEX tasks_queue ON tasks(status, id);

  -- Outbox: written in the transaction that makes a task terminal, so an event is never lost and
  -- never sent for a state that was rolled back. The body is built at send time (fresh URLs).
  CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    task_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    lease_expires_at INTEGER,
    last_status_code INTEGER,
    last_error TEXT,
    event_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_at);
  CREATE INDEX webhook_deliveries_account ON webhook_deliveries(account_id, id);

  CREATE TABLE webhook_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
    attempted_at INTEGER NOT NULL,
    status_code INTEGER,
    error TEXT,
    duration_ms INTEGER NOT NULL
  );
  CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);

  -- The current secret has retired_at NULL; a rotated-out one signs too until expires_at.
  CREATE TABLE webhook_secrets (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    secret TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    retired_at INTEGER,
    expires_at INTEGER
  );
  CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets(account_id) WHERE retired_at IS NULL;
  `,
  `
  -- Idempotency-Key (docs/design.md §3.8): one row per (account, key). An in_flight row is held under a
  -- lease token until lease_expires_at; a completed row keeps the first response for replay.
  CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in_flight', 'completed')),
    lease_token TEXT,
    lease_expires_at INTEGER,
    response_status INTEGER,
    response_headers TEXT,
    response_body BLOB,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, key)
  ) WITHOUT ROWID;
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);
  `,
  `
  -- Blobs to delete once due_at has passed. A writer records its key here (due after a grace
  -- period) before putting the blob, and the transaction that inserts the media row removes it:
  -- a crash in between leaves an orphan the sweeper finds without listing the blob store.
  -- Deleting a media row records its blob here (due at once) in the same transaction.
  CREATE TABLE blob_deletions (
    blob_key TEXT PRIMARY KEY,
    due_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX blob_deletions_due ON blob_deletions(due_at);
  `,
  `
  -- The account's CREATED + IN_PROGRESS tasks, kept by the transactions that create a task and
  -- that make one terminal, so that the MAX_ACTIVE_TASKS check on every create is one row read
  -- instead of a count that grows with the cap.
  ALTER TABLE accounts ADD COLUMN active_tasks INTEGER NOT NULL DEFAULT 0;
  UPDATE accounts SET active_tasks = (
    SELECT count(*) FROM tasks WHERE tasks.account_id = accounts.id AND tasks.status IN ('CREATED', 'IN_PROGRESS')
  );
  `,
  `
  -- Idempotency keys move out of a WITHOUT ROWID table keyed by (account_id, key). There every row,
  -- with the response it replays, went to a random place in one B-tree: a few rows per page, so each
  -- new key dirtied a page of its own (and often split it), and a lookup read pages that no cache
  -- of bounded size keeps. In a rowid table the rows are appended, so the keys a batch records
  -- share their pages, and only the (account_id, key) index, a tenth of the bytes, takes a random
  -- insert and serves lookups.
  CREATE TABLE idempotency_keys_by_rowid (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in_flight', 'completed')),
    lease_token TEXT,
    lease_expires_at INTEGER,
    response_status INTEGER,
    response_headers TEXT,
    response_body BLOB,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  INSERT INTO idempotency_keys_by_rowid
    SELECT account_id, key, fingerprint, status, lease_token, lease_expires_at, response_status, response_headers,
           response_body, created_at, expires_at
    FROM idempotency_keys ORDER BY created_at;
  DROP TABLE idempotency_keys;
  ALTER TABLE idempotency_keys_by_rowid RENAME TO idempotency_keys;
  CREATE UNIQUE INDEX idempotency_keys_account_key ON idempotency_keys(account_id, key);
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);
  `,
  `
  -- One per-account index of tasks instead of three. (account_id, id), (account_id, status, id) and
  -- (account_id, model, id) each put an account's newest entries on a page of their own, so a
  -- create wrote one page per index for its account: half of the pages a create adds to the WAL,
  -- and about a third of the store's time per create (docs/performance-history.md, "Optimisations"). A list
  -- now merges the index's (model, status) ranges, each walked newest first (SqliteStore.listTasks),
  -- and a page still costs the same at any depth.
  DROP INDEX tasks_account;
  DROP INDEX tasks_account_status;
  DROP INDEX tasks_account_model;
  CREATE INDEX tasks_account_model_status ON tasks(account_id, model, status, id);
  `,
  `
  -- Ledger entry ids count per account (1, 2, 3 … of this account), not one sequence shared by all
  -- accounts: in the API the id is the entry's number in its account, and a shared sequence told
  -- each account how many entries every other account made in between. Existing entries are
  -- numbered in their order. A page of the ledger is keyed by this number.
  ALTER TABLE ledger ADD COLUMN account_seq INTEGER;
  UPDATE ledger SET account_seq = numbered.seq
    FROM (SELECT id, row_number() OVER (PARTITION BY account_id ORDER BY id) AS seq FROM ledger) AS numbered
    WHERE ledger.id = numbered.id;
  CREATE UNIQUE INDEX ledger_account_seq ON ledger(account_id, account_seq);
  DROP INDEX ledger_account;

  -- A manual retry of a webhook delivery is an attempt outside its schedule: scheduled_attempts
  -- counts only the scheduled ones (the schedule's position), manual_attempt marks a queued manual
  -- retry, and resume_at keeps the scheduled attempt it went ahead of, to which a failed manual
  -- retry returns the delivery.
  ALTER TABLE webhook_deliveries ADD COLUMN scheduled_attempts INTEGER NOT NULL DEFAULT 0;
  UPDATE webhook_deliveries SET scheduled_attempts = attempts;
  ALTER TABLE webhook_deliveries ADD COLUMN manual_attempt INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE webhook_deliveries ADD COLUMN resume_at INTEGER;
  `,
  `
  -- Capacity (docs/design.md §3.5, §4). A claim refused by the provider for capacity goes back to the queue
  -- without spending one of the task's attempts: deferred_attempts counts those claims.
  ALTER TABLE tasks ADD COLUMN deferred_attempts INTEGER NOT NULL DEFAULT 0;
  -- 1 from the claim until the attempt's upstream call ends: a backend's calls in flight are its
  -- tasks in progress that are still calling (storing a result holds no provider slot).
  ALTER TABLE tasks ADD COLUMN calling INTEGER NOT NULL DEFAULT 0;
  -- The queue serves accounts in turn: the accounts with queued tasks, each one's oldest runnable
  -- task, and each one's tasks in progress are all ranges of (status, account_id, id).
  DROP INDEX tasks_queue;
  CREATE INDEX tasks_queue ON tasks(status, account_id, id);
  -- Each remote backend's adaptive limit on calls in flight, shared by every worker process
  -- (core/backend-capacity.ts decides; the state is kept as it returns it).
  CREATE TABLE backend_limits (
    backend TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  `
  -- Manual replays of webhook deliveries within the budget's window (docs/design.md §3.6): one row per
  -- replay, counted per delivery and per account; rows older than the window are deleted as the
  -- account replays again.
  CREATE TABLE webhook_replays (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    replayed_at INTEGER NOT NULL
  );
  CREATE INDEX webhook_replays_delivery ON webhook_replays(delivery_id, replayed_at);
  CREATE INDEX webhook_replays_account ON webhook_replays(account_id, replayed_at);
  `,
  `
  -- Ledger entry ids are UUIDv7 (docs/design.md §3.8), like task ids: the API's LedgerEntry.id is a uuid,
  -- and a number (even one counted per account) is not. Existing entries get a UUIDv7 of their
  -- created_at with random bits; new ones get theirs when they are written. Pages stay keyed by
  -- account_seq, so their order and the cursors handed out before this change are unchanged.
  ALTER TABLE ledger ADD COLUMN entry_id TEXT;
  UPDATE ledger SET entry_id = printf(
    '%08x-%04x-7%03x-%04x-%012x',
    (created_at >> 16) & 4294967295, created_at & 65535, random() & 4095, 32768 | (random() & 16383),
    random() & 281474976710655
  );
  CREATE UNIQUE INDEX ledger_entry_id ON ledger(entry_id);
  `,
  `
  -- Output formats and end users (decision 0024). A task made before them is a PNG task:
  -- output_format 'png', output_compression NULL (PNG has none). end_user_id is the end user of the
  -- account's own product (the OpenAI face's \`user\`), kept for the providers' safety identifier.
  ALTER TABLE tasks ADD COLUMN output_format TEXT NOT NULL DEFAULT 'png';
  ALTER TABLE tasks ADD COLUMN output_compression INTEGER;
  ALTER TABLE tasks ADD COLUMN end_user_id TEXT;
  `,
  `
  -- Seeds (docs/design.md §3.1): the seed each task is made with, asked for or drawn at create, so
  -- that every result can be made again. NULL for the tasks made before seeds were recorded.
  ALTER TABLE tasks ADD COLUMN seed INTEGER;
  `,
  `
  -- OAuth for the MCP server (docs/design.md §3.10, decision 0034): registered clients, authorization
  -- codes and tokens, each code and token stored as its SHA-256 only. A code and the tokens issued
  -- from it share family_id; a token names the API key it was issued through, so that revoking the
  -- key refuses the token (read through the join, no second write).
  CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE oauth_codes (
    hash TEXT PRIMARY KEY,
    family_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    key_id TEXT NOT NULL REFERENCES api_keys(id),
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    used_at INTEGER
  ) WITHOUT ROWID;
  CREATE TABLE oauth_tokens (
    hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    family_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    key_id TEXT NOT NULL REFERENCES api_keys(id),
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    used_at INTEGER,
    revoked_at INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX oauth_tokens_family ON oauth_tokens(family_id);
  `,
  `
  -- Operating the business over HTTP (decision 0036): suspended accounts, scoped keys, the key a
  -- task was made with (key budgets and usage count by it), grants with an Idempotency-Key and a
  -- reference, admin keys and their append-only audit log.
  ALTER TABLE accounts ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended'));
  ALTER TABLE api_keys ADD COLUMN models TEXT;
  ALTER TABLE api_keys ADD COLUMN budget_tokens INTEGER;
  ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
  ALTER TABLE api_keys ADD COLUMN creates_per_min INTEGER;
  ALTER TABLE api_keys ADD COLUMN requests_per_min INTEGER;
  ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
  ALTER TABLE tasks ADD COLUMN key_id TEXT;
  -- A key's spend in its period is one range of this index (ids start with their millisecond).
  CREATE INDEX tasks_key_spend ON tasks(key_id, id, status, cost) WHERE key_id IS NOT NULL;
  -- Usage of one account over a time range reads this index alone.
  CREATE INDEX tasks_account_usage ON tasks(account_id, id, model, status, cost, key_id, created_at);
  ALTER TABLE ledger ADD COLUMN reference TEXT;
  ALTER TABLE ledger ADD COLUMN idempotency_key TEXT;
  CREATE UNIQUE INDEX ledger_idempotency_key ON ledger(account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE INDEX accounts_name ON accounts(name);

  CREATE TABLE admin_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
  );

  CREATE TABLE admin_audit_log (
    id TEXT PRIMARY KEY,
    admin_key_id TEXT,
    action TEXT NOT NULL,
    target TEXT,
    status_code INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    client_address TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TRIGGER admin_audit_log_no_update BEFORE UPDATE ON admin_audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
  CREATE TRIGGER admin_audit_log_no_delete BEFORE DELETE ON admin_audit_log
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
  `,
  `
  -- The create's cost (decision 0038). Every create wrote two per-account index entries
  -- more than before the business API (tasks_account_usage, tasks_key_spend), each on a page of its
  -- own account's (decision 0008). Usage now reads the list's index, widened with what the report
  -- sums (cost, key_id, created_at): one range per (model, status) pair of the account, as a page
  -- of the list is; the list reads the same ranges as before.
  DROP INDEX tasks_account_usage;
  DROP INDEX tasks_account_model_status;
  CREATE INDEX tasks_account_model_status ON tasks(account_id, model, status, id, cost, key_id, created_at);
  -- A key with a budget has its spend per period kept in a row (added to by its creates, taken from
  -- by refunds; period_start in epoch ms, 0 for a lifetime budget), read by its creates: one row
  -- instead of a sum over the key's tasks of the period, and no index entry per task of every key.
  CREATE TABLE key_spend (
    key_id TEXT NOT NULL REFERENCES api_keys(id),
    period_start INTEGER NOT NULL,
    spent INTEGER NOT NULL,
    PRIMARY KEY (key_id, period_start)
  ) WITHOUT ROWID;
  INSERT INTO key_spend (key_id, period_start, spent)
    SELECT t.key_id, CASE k.budget_period
        WHEN 'day' THEN t.created_at - t.created_at % 86400000
        WHEN 'month' THEN CAST(strftime('%s', t.created_at / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000
        ELSE 0 END AS period, sum(t.cost)
    FROM tasks AS t JOIN api_keys AS k ON k.id = t.key_id
    WHERE k.budget_tokens IS NOT NULL AND t.status NOT IN ('FAILED', 'CANCELED')
    GROUP BY t.key_id, period;
  DROP INDEX tasks_key_spend;
  `,
];
