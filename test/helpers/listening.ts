import type { FastifyInstance } from 'fastify';
import { listenOnLoopback } from './raw-http.js';

const ports = new WeakMap<FastifyInstance, Promise<number>>();

/**
 * The loopback port of an app that listens once for all the tests that need a socket (the app of
 * a whole file, fileTestApp): the first call starts it listening, the others get the same port.
 * The app's close, at the file's teardown, stops it.
 */
export function loopbackPort(app: FastifyInstance): Promise<number> {
  let port = ports.get(app);
  if (!port) {
    port = listenOnLoopback(app);
    ports.set(app, port);
  }
  return port;
}
