/**
 * Long-lived requests held at once, per process and per API key: uploads in flight (each holds a
 * connection, a spool file and later a place in the decode queue) and open event streams (each
 * holds a connection for up to the task's deadline). Without a cap, a client could open hundreds
 * and hold them.
 */
export class ConnectionSlots {
  private total = 0;
  private readonly byKey = new Map<string, number>();

  constructor(private readonly limits: { perProcess: number; perKey: number }) {}

  /**
   * Takes a slot for one request of `keyId`: a function that gives it back (call it once), or why
   * none was free ('process': the process is full; 'key': this key has its share already).
   */
  acquire(keyId: string): { release: () => void } | { refused: 'process' | 'key' } {
    const ofKey = this.byKey.get(keyId) ?? 0;
    if (ofKey >= this.limits.perKey) return { refused: 'key' };
    if (this.total >= this.limits.perProcess) return { refused: 'process' };
    this.total += 1;
    this.byKey.set(keyId, ofKey + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total -= 1;
        const left = (this.byKey.get(keyId) ?? 1) - 1;
        if (left === 0) this.byKey.delete(keyId);
        else this.byKey.set(keyId, left);
      },
    };
  }

  get inFlight(): number {
    return this.total;
  }
}
