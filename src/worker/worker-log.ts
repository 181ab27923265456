/** Where the background work logs (pino's shape); tests pass none. */
export interface WorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export const silentLog: WorkerLog = { info() {}, warn() {}, error() {} };
