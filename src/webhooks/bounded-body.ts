import type { ClientRequest, IncomingMessage } from 'node:http';

/** A response body longer than the reader takes. */
export class BodyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`larger than ${maxBytes} bytes`);
  }
}

/**
 * The whole body of a response to a URL someone else chose (a provider's result URL, an OAuth
 * client's metadata document), at most `maxBytes`: refused by its Content-Length before a byte is
 * read, or as soon as more arrives, and the request is then destroyed so nothing more is received.
 */
export function readBoundedBody(request: ClientRequest, response: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => {
      request.destroy();
      reject(new BodyTooLargeError(maxBytes));
    };
    if (Number(response.headers['content-length']) > maxBytes) {
      tooLarge();
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    response.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) tooLarge();
      else chunks.push(chunk);
    });
    response.on('end', () => resolve(Buffer.concat(chunks)));
    response.on('error', reject);
  });
}
