import pg from 'pg';

/**
 * What other processes hear of tasks: one was created (or requeued), with its model when all the
 * tasks it tells of share one (workers then claim only for the backends that run it), or one
 * changed state.
 */
export type TaskSignal = { kind: 'created'; model?: string } | { kind: 'changed'; taskId: string };

/** One channel per schema, so that deployments (and test schemas) sharing a database do not wake each other. */
const CHANNEL_PREFIX = 'imagegen_tasks:';
const RECONNECT_DELAY_MS = 1000;

/**
 * LISTEN/NOTIFY for task signals across processes. The store raises them inside the transactions
 * that make the change, so that a signal is delivered exactly when the change is visible. A
 * connection of its own listens, and reconnects after a loss; whatever is missed meanwhile is
 * found by the listeners' fallback polling.
 */
export class TaskSignals {
  private client: pg.Client | null = null;
  private readonly listeners: ((signal: TaskSignal) => void)[] = [];
  private closed = false;
  private connecting: Promise<void> | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly connectionString: string,
    private readonly schema: string | undefined,
  ) {}

  /** The payload that carries `signal` (short: NOTIFY payloads share an 8 GB queue with every listener). */
  static payload(signal: TaskSignal): string {
    return signal.kind === 'created' ? `c${signal.model ?? ''}` : `x${signal.taskId}`;
  }

  static parse(payload: string | undefined): TaskSignal | null {
    // A bare "c" (no model, or a process of an earlier version) wakes every backend.
    if (payload?.startsWith('c'))
      return payload.length > 1 ? { kind: 'created', model: payload.slice(1) } : { kind: 'created' };
    if (payload?.startsWith('x')) return { kind: 'changed', taskId: payload.slice(1) };
    return null;
  }

  async listen(listener: (signal: TaskSignal) => void): Promise<void> {
    this.listeners.push(listener);
    this.connecting ??= this.connect();
    await this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      ...(this.schema ? { options: `-c search_path=${this.schema}` } : {}),
    });
    client.on('notification', (message) => {
      const signal = TaskSignals.parse(message.payload);
      if (signal) for (const listener of this.listeners) listener(signal);
    });
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      client.end().catch(() => {});
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', lost);
    await client.connect();
    const { rows } = await client.query<{ schema: string }>('SELECT current_schema() AS schema');
    await client.query(`LISTEN ${client.escapeIdentifier(CHANNEL_PREFIX + rows[0].schema)}`);
    if (this.closed) {
      await client.end();
      return;
    }
    this.client = client;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connecting = this.connect().catch(() => this.scheduleReconnect());
    }, RECONNECT_DELAY_MS);
    this.reconnectTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}

/** The SQL expression of the current schema's channel, for pg_notify in the store's transactions. */
export const CHANNEL_SQL = `'${CHANNEL_PREFIX}' || current_schema()`;
