/**
 * Schema versions of the PostgreSQL store, applied in order under an advisory lock
 * (PostgresStore.migrate); schema_migrations records which ran. Never edit a released entry:
 * append a new one. Ids are text in the "C" collation so that they sort byte by byte, as UUIDv7
 * strings sort by creation time; times are timestamptz; token amounts bigint.
 */
export const POSTGRES_MIGRATIONS: string[] = [
  `
  CREATE TABLE accounts (
    id text COLLATE "C" PRIMARY KEY,
    name text NOT NULL,
    balance bigint NOT NULL CHECK (balance >= 0),
    -- CREATED + IN_PROGRESS tasks, kept by the transactions that create and finish tasks, so the
    -- MAX_ACTIVE_TASKS check is a conditional update of this row.
    active_tasks integer NOT NULL DEFAULT 0 CHECK (active_tasks >= 0),
    created_at timestamptz NOT NULL
  );

  CREATE TABLE api_keys (
    id text COLLATE "C" PRIMARY KEY,
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    name text NOT NULL,
    prefix text NOT NULL UNIQUE,
    hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at timestamptz
  );
  CREATE INDEX api_keys_account ON api_keys(account_id, created_at);

  CREATE TABLE ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    kind text NOT NULL CHECK (kind IN ('grant', 'debit', 'refund')),
    amount bigint NOT NULL CHECK (amount > 0),
    balance_after bigint NOT NULL CHECK (balance_after >= 0),
    task_id text COLLATE "C",
    note text,
    created_at timestamptz NOT NULL
  );
  CREATE INDEX ledger_account ON ledger(account_id, id);
  -- A task is debited once and refunded at most once, whatever races happen above.
  CREATE UNIQUE INDEX ledger_task_once ON ledger(task_id, kind) WHERE task_id IS NOT NULL;

  CREATE TABLE tasks (
    id text COLLATE "C" PRIMARY KEY,
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    status text NOT NULL CHECK (status IN ('CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED')),
    model text NOT NULL,
    prompt text NOT NULL,
    image_reference json NOT NULL,
    aspect_ratio text NOT NULL,
    resolution text NOT NULL,
    width integer NOT NULL,
    height integer NOT NULL,
    cost bigint NOT NULL,
    webhook_url text,
    generated json NOT NULL,
    error_code text,
    error_message text,
    attempt integer NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    run_after timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    completed_at timestamptz
  );
  -- Keyset indexes of the newest-first lists, one per combination of filters, so that a page is one
  -- index range read in order at any depth (no sort of all an account's matching tasks).
  CREATE INDEX tasks_account ON tasks(account_id, id);
  CREATE INDEX tasks_account_status ON tasks(account_id, status, id);
  CREATE INDEX tasks_account_model ON tasks(account_id, model, id);
  CREATE INDEX tasks_account_model_status ON tasks(account_id, model, status, id);
  -- The queue: runnable tasks oldest first, and running tasks by lease expiry. Partial, so they
  -- hold only the few active tasks however many finished ones the table keeps.
  CREATE INDEX tasks_runnable ON tasks(id) WHERE status = 'CREATED';
  CREATE INDEX tasks_leased ON tasks(lease_expires_at) WHERE status = 'IN_PROGRESS';

  CREATE TABLE media (
    id text COLLATE "C" PRIMARY KEY,
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    source text NOT NULL CHECK (source IN ('upload', 'generated')),
    content_type text NOT NULL,
    width integer NOT NULL,
    height integer NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    blob_key text NOT NULL,
    task_id text COLLATE "C",
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
  );
  CREATE INDEX media_account ON media(account_id, id);
  CREATE INDEX media_expiry ON media(expires_at);

  -- Blobs to delete once due_at has passed (see the SQLite migration 3 for the protocol).
  CREATE TABLE blob_deletions (
    blob_key text COLLATE "C" PRIMARY KEY,
    due_at timestamptz NOT NULL
  );
  CREATE INDEX blob_deletions_due ON blob_deletions(due_at);

  CREATE TABLE idempotency_keys (
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    key text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL CHECK (status IN ('in_flight', 'completed')),
    lease_token text,
    lease_expires_at timestamptz,
    response_status integer,
    response_headers json,
    response_body bytea,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, key)
  );
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);

  -- Outbox: written in the transaction that makes a task terminal.
  CREATE TABLE webhook_deliveries (
    id text COLLATE "C" PRIMARY KEY,
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    task_id text COLLATE "C" NOT NULL,
    event_type text NOT NULL,
    url text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_status_code integer,
    last_error text,
    event_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_account ON webhook_deliveries(account_id, id);

  CREATE TABLE webhook_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id text COLLATE "C" NOT NULL REFERENCES webhook_deliveries(id),
    attempted_at timestamptz NOT NULL,
    status_code integer,
    error text,
    duration_ms integer NOT NULL
  );
  CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);

  -- The current secret has retired_at NULL; a rotated-out one signs too until expires_at.
  CREATE TABLE webhook_secrets (
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    secret text NOT NULL,
    created_at timestamptz NOT NULL,
    retired_at timestamptz,
    expires_at timestamptz
  );
  CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets(account_id) WHERE retired_at IS NULL;

  -- Secrets every process of a cluster must share (the media URL signing key): kept here rather
  -- than generated into each process's DATA_DIR, where they would silently differ.
  CREATE TABLE service_secrets (
    name text PRIMARY KEY,
    secret text NOT NULL,
    created_at timestamptz NOT NULL
  );
  `,
  `
  -- Ledger entry ids count per account (1, 2, 3 … of this account), not one sequence shared by all
  -- accounts, which told each account how many entries the others made in between. The next number
  -- is taken under the account's row lock (the balance update), so one account's numbers follow
  -- the order of its balances.
  ALTER TABLE ledger ADD COLUMN account_seq bigint;
  UPDATE ledger SET account_seq = numbered.seq
    FROM (SELECT id, row_number() OVER (PARTITION BY account_id ORDER BY id) AS seq FROM ledger) AS numbered
    WHERE ledger.id = numbered.id;
  ALTER TABLE ledger ALTER COLUMN account_seq SET NOT NULL;
  CREATE UNIQUE INDEX ledger_account_seq ON ledger(account_id, account_seq);
  DROP INDEX ledger_account;

  -- A manual retry of a webhook delivery is an attempt outside its schedule (see the SQLite
  -- migration of the same change): scheduled_attempts is the schedule's position, manual_attempt
  -- marks a queued manual retry, resume_at the scheduled attempt it went ahead of.
  ALTER TABLE webhook_deliveries ADD COLUMN scheduled_attempts integer NOT NULL DEFAULT 0;
  UPDATE webhook_deliveries SET scheduled_attempts = attempts;
  ALTER TABLE webhook_deliveries ADD COLUMN manual_attempt boolean NOT NULL DEFAULT false;
  ALTER TABLE webhook_deliveries ADD COLUMN resume_at timestamptz;
  `,
  `
  -- Capacity (see the SQLite migration of the same change): claims deferred for want of capacity
  -- spend no attempt; the queue serves accounts in turn, by their queued and running tasks; each
  -- remote backend's adaptive limit is kept here for every worker process.
  ALTER TABLE tasks ADD COLUMN deferred_attempts integer NOT NULL DEFAULT 0;
  ALTER TABLE tasks ADD COLUMN calling boolean NOT NULL DEFAULT false;
  CREATE INDEX tasks_queued_by_account ON tasks(account_id, id) WHERE status = 'CREATED';
  CREATE INDEX tasks_in_progress_by_account ON tasks(account_id) WHERE status = 'IN_PROGRESS';
  CREATE TABLE backend_limits (
    backend text PRIMARY KEY,
    state jsonb NOT NULL,
    updated_at timestamptz NOT NULL
  );
  `,
  `
  -- Manual replays of webhook deliveries within the budget's window (see the SQLite migration of
  -- the same change).
  CREATE TABLE webhook_replays (
    delivery_id text COLLATE "C" NOT NULL REFERENCES webhook_deliveries(id),
    account_id text COLLATE "C" NOT NULL REFERENCES accounts(id),
    replayed_at timestamptz NOT NULL
  );
  CREATE INDEX webhook_replays_delivery ON webhook_replays(delivery_id, replayed_at);
  CREATE INDEX webhook_replays_account ON webhook_replays(account_id, replayed_at);
  `,
  `
  -- Ledger entry ids are UUIDv7 (see the SQLite migration of the same change): existing entries
  -- get a UUIDv7 of their created_at with random bits (a v4's, whose variant bits are the same);
  -- pages stay keyed by account_seq, so order and earlier cursors are unchanged.
  ALTER TABLE ledger ADD COLUMN entry_id text COLLATE "C";
  UPDATE ledger SET entry_id = overlay(
    overlay(gen_random_uuid()::text PLACING '7' FROM 15 FOR 1)
    PLACING (substr(ms, 1, 8) || '-' || substr(ms, 9, 4)) FROM 1 FOR 13
  ) FROM (SELECT id AS ledger_id, lpad(to_hex((extract(epoch FROM created_at) * 1000)::bigint), 12, '0') AS ms
          FROM ledger) AS times
  WHERE ledger.id = times.ledger_id;
  ALTER TABLE ledger ALTER COLUMN entry_id SET NOT NULL;
  CREATE UNIQUE INDEX ledger_entry_id ON ledger(entry_id);
  `,
  `
  -- Output formats and end users (see the SQLite migration of the same change): old tasks are PNG
  -- tasks; end_user_id is the OpenAI face's \`user\`, for the providers' safety identifier.
  ALTER TABLE tasks ADD COLUMN output_format text NOT NULL DEFAULT 'png';
  ALTER TABLE tasks ADD COLUMN output_compression integer;
  ALTER TABLE tasks ADD COLUMN end_user_id text;
  `,
  `
  -- The account as an admission reads it (accounts.ts, lockAdmittingAccountIn): its row locked,
  -- then its active tasks counted, in one round trip instead of two. The count must see every
  -- admission that held the lock before this one: a VOLATILE function takes a new snapshot for each
  -- of its statements, so the count's is taken after the lock was granted (one statement doing both
  -- would count in a snapshot taken before it waited for the lock). PL/pgSQL keeps the two plans
  -- for the session. It reads only: what the admission decides stays in src/core.
  CREATE FUNCTION admitting_account(p_account text, p_statuses text[], p_count_limit integer)
  RETURNS TABLE (balance bigint, active bigint) LANGUAGE plpgsql VOLATILE AS $$
  #variable_conflict use_column
  BEGIN
    PERFORM 1 FROM accounts AS a WHERE a.id = p_account FOR UPDATE;
    RETURN QUERY SELECT a.balance, (
        SELECT count(*) FROM (
          SELECT 1 FROM tasks AS t WHERE t.account_id = p_account AND t.status = ANY(p_statuses) LIMIT p_count_limit
        ) AS active_tasks
      ) FROM accounts AS a WHERE a.id = p_account;
  END
  $$;
  `,
  `
  -- Seeds (see the SQLite migration of the same change): 0 to 4294967295, so a bigint; NULL for
  -- the tasks made before seeds were recorded.
  ALTER TABLE tasks ADD COLUMN seed bigint;
  `,
  `
  -- OAuth for the MCP server (see the SQLite migration of the same change): clients, codes and
  -- tokens, codes and tokens stored as their SHA-256 only.
  CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY,
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL
  );
  CREATE TABLE oauth_codes (
    hash text PRIMARY KEY,
    family_id text NOT NULL,
    client_id text NOT NULL,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    resource text NOT NULL,
    scope text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    used_at timestamptz
  );
  CREATE TABLE oauth_tokens (
    hash text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
    family_id text NOT NULL,
    client_id text NOT NULL,
    account_id text NOT NULL REFERENCES accounts(id),
    key_id text NOT NULL REFERENCES api_keys(id),
    resource text NOT NULL,
    scope text NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    used_at timestamptz,
    revoked_at timestamptz
  );
  CREATE INDEX oauth_tokens_family ON oauth_tokens(family_id);
  `,
  `
  -- Operating the business over HTTP (decision 0036): suspended accounts, scoped keys, the key a
  -- task was made with (key budgets and usage count by it), grants with an Idempotency-Key and a
  -- reference, admin keys and their append-only audit log.
  ALTER TABLE accounts ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended'));
  ALTER TABLE api_keys ADD COLUMN models text[];
  ALTER TABLE api_keys ADD COLUMN budget_tokens bigint;
  ALTER TABLE api_keys ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'month'));
  ALTER TABLE api_keys ADD COLUMN creates_per_min integer;
  ALTER TABLE api_keys ADD COLUMN requests_per_min integer;
  ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
  ALTER TABLE tasks ADD COLUMN key_id text COLLATE "C";
  -- A key's spend in its period is one range of this index (ids start with their millisecond).
  CREATE INDEX tasks_key_spend ON tasks(key_id, id) INCLUDE (status, cost) WHERE key_id IS NOT NULL;
  -- Usage of one account over a time range reads this index alone.
  CREATE INDEX tasks_account_usage ON tasks(account_id, id) INCLUDE (model, status, cost, key_id, created_at);
  ALTER TABLE ledger ADD COLUMN reference text;
  ALTER TABLE ledger ADD COLUMN idempotency_key text;
  CREATE UNIQUE INDEX ledger_idempotency_key ON ledger(account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE INDEX accounts_name ON accounts(name);

  CREATE TABLE admin_keys (
    id text COLLATE "C" PRIMARY KEY,
    name text NOT NULL,
    prefix text NOT NULL UNIQUE,
    hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at timestamptz
  );

  CREATE TABLE admin_audit_log (
    id text COLLATE "C" PRIMARY KEY,
    admin_key_id text,
    action text NOT NULL,
    target text,
    status_code integer NOT NULL,
    request_id text NOT NULL,
    client_address text NOT NULL,
    created_at timestamptz NOT NULL
  );
  CREATE FUNCTION admin_audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
  END
  $$;
  CREATE TRIGGER admin_audit_log_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON admin_audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION admin_audit_log_append_only();

  -- The admission's read (decision 0030) now also reads the account's status and, for a key with a
  -- budget, what the key's tasks since the period's first id cost (refunded ones not counted), all
  -- after the account's lock: every create of the key takes it, so the sum is exact.
  DROP FUNCTION admitting_account(text, text[], integer);
  CREATE FUNCTION admitting_account(p_account text, p_statuses text[], p_count_limit integer, p_key text, p_since text)
  RETURNS TABLE (balance bigint, active bigint, status text, spent bigint) LANGUAGE plpgsql VOLATILE AS $$
  #variable_conflict use_column
  BEGIN
    PERFORM 1 FROM accounts AS a WHERE a.id = p_account FOR UPDATE;
    RETURN QUERY SELECT a.balance, (
        SELECT count(*) FROM (
          SELECT 1 FROM tasks AS t WHERE t.account_id = p_account AND t.status = ANY(p_statuses) LIMIT p_count_limit
        ) AS active_tasks
      ), a.status, (
        SELECT coalesce(sum(t.cost), 0)::bigint FROM tasks AS t
        WHERE p_key IS NOT NULL AND t.key_id = p_key AND t.id >= p_since AND t.status NOT IN ('FAILED', 'CANCELED')
      ) FROM accounts AS a WHERE a.id = p_account;
  END
  $$;
  `,
  `
  -- The create's cost (decision 0038; see the SQLite migration of the same change). The
  -- unfiltered list's (account_id, id) is the key of tasks_account_usage already, which serves it
  -- as well: one index fewer written per create.
  DROP INDEX tasks_account;
  -- A key with a budget has its spend per period kept in a row (added to by its creates, taken from
  -- by refunds), read after the account's lock by its creates: one row instead of a sum over the
  -- key's tasks of the period, and no index entry per task of every key.
  CREATE TABLE key_spend (
    key_id text COLLATE "C" NOT NULL REFERENCES api_keys(id),
    period_start timestamptz NOT NULL,
    spent bigint NOT NULL,
    PRIMARY KEY (key_id, period_start)
  );
  INSERT INTO key_spend (key_id, period_start, spent)
    SELECT t.key_id, CASE k.budget_period
        WHEN 'day' THEN date_trunc('day', t.created_at, 'UTC')
        WHEN 'month' THEN date_trunc('month', t.created_at, 'UTC')
        ELSE 'epoch'::timestamptz END, sum(t.cost)
    FROM tasks AS t JOIN api_keys AS k ON k.id = t.key_id
    WHERE k.budget_tokens IS NOT NULL AND t.status NOT IN ('FAILED', 'CANCELED')
    GROUP BY 1, 2;
  DROP INDEX tasks_key_spend;
  DROP FUNCTION admitting_account(text, text[], integer, text, text);
  CREATE FUNCTION admitting_account(p_account text, p_statuses text[], p_count_limit integer, p_key text,
    p_period timestamptz)
  RETURNS TABLE (balance bigint, active bigint, status text, spent bigint) LANGUAGE plpgsql VOLATILE AS $$
  #variable_conflict use_column
  BEGIN
    PERFORM 1 FROM accounts AS a WHERE a.id = p_account FOR UPDATE;
    RETURN QUERY SELECT a.balance, (
        SELECT count(*) FROM (
          SELECT 1 FROM tasks AS t WHERE t.account_id = p_account AND t.status = ANY(p_statuses) LIMIT p_count_limit
        ) AS active_tasks
      ), a.status, coalesce((
        SELECT s.spent FROM key_spend AS s WHERE s.key_id = p_key AND s.period_start = p_period
      ), 0)::bigint FROM accounts AS a WHERE a.id = p_account;
  END
  $$;
  `,
];
