import { createReadStream } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { multipartEnvelope } from './images.js';

/**
 * One multipart upload to POST /api/v1/media whose body is streamed from a file in 64 KiB chunks,
 * so that a client in the measured process holds a chunk at a time. Resolves to the status code.
 */
export function uploadFile(port: number, key: string, path: string, size: number): Promise<number> {
  const { head, tail, contentType } = multipartEnvelope();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/v1/media',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': contentType,
          'content-length': head.length + size + tail.length,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.write(head);
    const file = createReadStream(path, { highWaterMark: 64 * 1024 });
    file.on('error', reject);
    file.on('end', () => req.end(tail));
    file.pipe(req, { end: false });
  });
}
