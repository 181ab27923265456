/**
 * Uploads in flight, per process and per API key. Each one holds a connection, a spool file and
 * later a place in the decode queue; without a cap, a client could open hundreds and hold them.
 */
export class UploadSlots {
  private total = 0;
  private readonly byKey = new Map<string, number>();

  constructor(private readonly limits: { perProcess: number; perKey: number }) {}

  /**
   * Takes a slot for one upload of `keyId`: a function that gives it back (call it once), or why
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
