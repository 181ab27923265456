/** The part of s3rver 3.7 (a CommonJS package without types) the tests use. */
declare module 's3rver' {
  import type { Server } from 'node:http';

  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    vhostBuckets?: boolean;
    allowMismatchedSignatures?: boolean;
    configureBuckets?: { name: string; configs?: string[] }[];
  }

  /** A Koa application: `middleware` is Koa's list, composed when the server starts. */
  class S3rver {
    constructor(options?: S3rverOptions);
    middleware: unknown[];
    store: {
      getResourcePath(bucket: string, key: string | undefined, resource: string): string;
      putObject(object: { bucket: string; key: string }): Promise<unknown>;
    };
    httpServer?: Server;
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    static defaultOptions: S3rverOptions;
  }
  export = S3rver;
}
