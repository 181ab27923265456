import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyMultipartBaseOptions, Multipart } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { DomainError, type FieldError } from '../core/errors.js';
import { dependencyFailureOf } from '../services/dependency-failure.js';
import { spoolFileName } from '../services/upload-spool.js';
import { escapePointer } from '../contract/problems.js';

/** The one part an upload body may have. */
export const UPLOAD_FIELD = 'file';

/**
 * Parser limits for the upload route. The handler refuses any part other than one `file`, so the
 * parser only has to keep the rest small until the handler sees it: one file, a couple of short
 * fields (refused by name), a few parts, a few headers per part.
 */
export function uploadParserOptions(maxBytes: number): FastifyMultipartBaseOptions {
  return {
    limits: { fileSize: maxBytes, files: 1, fields: 2, fieldSize: 1024, fieldNameSize: 100, parts: 3, headerPairs: 10 },
    // A part named `file` is the image even when the client left out its filename; other parts
    // follow the usual rule (a filename or application/octet-stream makes a file).
    isPartAFile: (fieldName, contentType, fileName) =>
      fieldName === UPLOAD_FIELD || fileName !== undefined || contentType === 'application/octet-stream',
    throwFileSizeLimit: true,
  };
}

export interface ReceivedUpload {
  /** A new file under the temp dir; the caller removes it. */
  path: string;
  sizeBytes: number;
  /** hex SHA-256 of the bytes as received (the idempotency fingerprint of the upload). */
  sha256: string;
}

/**
 * Streams the single `file` part of a multipart body into a new file under tempDir, counting and
 * hashing as it goes, so the body is never held in memory. Returns only once the whole body has
 * been parsed, so a second part or a broken body is refused before any image work starts. On
 * failure nothing is left on disk.
 */
export interface ReceiveOptions {
  tempDir: string;
  maxBytes: number;
  /** The connection is closed when the body sends nothing for this long (a stalled upload). */
  idleTimeoutMs: number;
}

export async function receiveSingleFile(request: FastifyRequest, options: ReceiveOptions): Promise<ReceivedUpload> {
  if (!request.isMultipart()) {
    throw new DomainError(
      'unsupported_media_type',
      'Send the image as multipart/form-data with one part named `file`.',
    );
  }
  await mkdir(options.tempDir, { recursive: true });
  const path = join(options.tempDir, spoolFileName());
  // A body that stops arriving would hold its socket and spool file for as long as the client
  // keeps the connection open. Silence for idleTimeoutMs closes the socket; the parser then fails
  // and the catch below removes the spool file.
  const stopWatchingIdle = closeWhenIdle(request, options.idleTimeoutMs);
  let received: ReceivedUpload | null = null;
  try {
    const parts = request.parts();
    for (let part = await nextPart(parts); part; part = await nextPart(parts)) {
      if (part.fieldname !== UPLOAD_FIELD) {
        throw partError(
          'unknown_field',
          `/${escapePointer(part.fieldname)}`,
          `Unexpected part "${part.fieldname}": the body has one part, named "${UPLOAD_FIELD}".`,
        );
      }
      // isPartAFile makes every `file` part a file, and the files limit of 1 stops a second one in
      // the parser; this only guards against a change of either.
      if (part.type !== 'file' || received)
        throw partError('too_many_parts', `/${UPLOAD_FIELD}`, `Send exactly one part named "${UPLOAD_FIELD}".`);
      received = { path, ...(await spool(part.file, path, options.maxBytes)) };
    }
  } catch (error) {
    await rm(path, { force: true });
    throw error;
  } finally {
    stopWatchingIdle();
  }
  if (!received)
    throw partError(
      'required',
      `/${UPLOAD_FIELD}`,
      `The body has no part named "${UPLOAD_FIELD}"; send the image in it.`,
    );
  if (received.sizeBytes === 0) {
    await rm(path, { force: true });
    throw partError('empty_file', `/${UPLOAD_FIELD}`, 'The file is empty.');
  }
  return received;
}

/**
 * Closes the connection when the request body sends nothing for idleTimeoutMs; the returned stop
 * is called once the body is in. From then on the silence is ours: the upload may wait its turn to
 * be decoded (or the images to be made) for longer than HTTP_IDLE_TIMEOUT_MS, and the client,
 * waiting for the answer, must not be cut off. Node sets the keep-alive timeout on the socket
 * again after the response.
 */
export function closeWhenIdle(request: FastifyRequest, idleTimeoutMs: number): () => void {
  const socket = request.raw.socket as Socket | undefined;
  if (typeof socket?.setTimeout !== 'function') return () => {};
  const closeIdle = () => {
    request.log.info({ idleTimeoutMs }, 'upload body stalled; connection closed');
    socket.destroy();
  };
  socket.setTimeout(idleTimeoutMs).on('timeout', closeIdle);
  return () => {
    socket.off('timeout', closeIdle).setTimeout(0);
  };
}

/** The parser's own limit errors (FST_*) go to the error handler as they are; anything else it throws means a broken body. */
export async function nextPart(parts: AsyncIterableIterator<Multipart>): Promise<Multipart | null> {
  try {
    const next = await parts.next();
    return next.done ? null : next.value;
  } catch (error) {
    if (isParserLimitError(error)) throw error;
    throw malformedBody(error);
  }
}

/** Streams one file part to `path`, counting and hashing; `field` is the part's name in errors. */
export async function spool(
  file: Readable & { truncated?: boolean },
  path: string,
  maxBytes: number,
  field: string = UPLOAD_FIELD,
): Promise<{ sizeBytes: number; sha256: string }> {
  let sizeBytes = 0;
  const hash = createHash('sha256');
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      sizeBytes += chunk.length;
      if (sizeBytes > maxBytes) return callback(fileTooLarge(maxBytes, field));
      hash.update(chunk);
      callback(null, chunk);
    },
  });
  // The parser stops at the limit and says so; stop at once instead of draining the rest.
  const onLimit = () => counter.destroy(fileTooLarge(maxBytes, field));
  file.once('limit', onLimit);
  // When the body ends inside the part, the parser destroys the part's stream, which may already
  // have been marked ended: pipeline() would then wait for an 'end' that never comes. A part that
  // closes before its end was read is cut short, whichever way it happened.
  const cutShort = () =>
    new DomainError('invalid_request', 'The multipart/form-data body ended inside the file part.', [
      {
        pointer: `/${field}`,
        location: 'body',
        code: 'malformed_multipart',
        detail: 'The body ended before the file part was complete.',
      },
    ]);
  if (file.destroyed) throw cutShort();
  const onClose = () => {
    if (!file.readableEnded) counter.destroy(cutShort());
  };
  file.once('close', onClose);
  let sourceError: unknown;
  const onSourceError = (error: unknown) => {
    sourceError = error;
  };
  file.once('error', onSourceError);
  try {
    await pipeline(file, counter, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
  } catch (error) {
    if (error instanceof DomainError) throw error;
    // A full spool disk is ours (503), though the parser reports it from its side first. (A reset
    // from the client is the client's: the body broke off.)
    if (dependencyFailureOf(error) === 'storage_full') throw error;
    // The body broke off or was malformed mid-part.
    if (error === sourceError || (error as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE')
      throw malformedBody(error);
    throw error;
  } finally {
    file.off('limit', onLimit);
    file.off('close', onClose);
    file.off('error', onSourceError);
  }
  if (file.truncated) throw fileTooLarge(maxBytes, field);
  return { sizeBytes, sha256: hash.digest('hex') };
}

const PARSER_LIMIT_CODES = new Set([
  'FST_REQ_FILE_TOO_LARGE',
  'FST_FILES_LIMIT',
  'FST_FIELDS_LIMIT',
  'FST_PARTS_LIMIT',
  'FST_PROTO_VIOLATION',
  'FST_INVALID_JSON_FIELD_ERROR',
]);

function isParserLimitError(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && PARSER_LIMIT_CODES.has(String((error as { code?: unknown }).code))
  );
}

function partError(code: string, pointer: string, detail: string): DomainError {
  const fieldError: FieldError = { pointer, location: 'body', code, detail };
  return new DomainError('invalid_request', detail, [fieldError]);
}

function fileTooLarge(maxBytes: number, field: string): DomainError {
  const detail = `The file is larger than ${maxBytes} bytes.`;
  return new DomainError('payload_too_large', detail, [
    { pointer: `/${field}`, location: 'body', code: 'too_large', detail },
  ]);
}

// Busboy's messages ("Unexpected end of form", "Multipart: Boundary not found") name the problem
// and nothing of ours, so they are passed on.
export function malformedBody(cause: unknown): DomainError {
  const reason = cause instanceof Error && cause.message.length <= 200 ? ` (${cause.message})` : '';
  return new DomainError('invalid_request', `The multipart/form-data body could not be parsed${reason}.`, [
    {
      pointer: '',
      location: 'body',
      code: 'malformed_multipart',
      detail: `The body is not well-formed multipart/form-data${reason}.`,
    },
  ]);
}
