import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyMultipartBaseOptions } from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../core/errors.js';
import { spoolFileName } from '../services/upload-spool.js';
import { closeWhenIdle, nextPart, spool, type ReceivedUpload } from './multipart-upload.js';

/**
 * The body of OpenAI's `images.edit`: multipart/form-data with the reference images as parts named
 * `image` (one) or `image[]` (several; the SDKs send either), and the other fields as text parts.
 * Each image is spooled to a file (never held in memory) for MediaService to check and store.
 */

export const EDIT_IMAGE_FIELDS = ['image', 'image[]'] as const;
/** Refused with a 400 naming it: inpainting is not offered. */
export const EDIT_MASK_FIELD = 'mask';
/** A text field's most bytes: the longest prompt (10 000 code points) in UTF-8, with room. */
const EDIT_FIELD_MAX_BYTES = 64 * 1024;

export function editParserOptions(maxBytes: number, maxImages: number): FastifyMultipartBaseOptions {
  return {
    // One more file than the most images, so that a body with too many is told so by name.
    limits: {
      fileSize: maxBytes,
      files: maxImages + 2,
      fields: 30,
      fieldSize: EDIT_FIELD_MAX_BYTES,
      fieldNameSize: 100,
      parts: maxImages + 32,
      headerPairs: 10,
    },
    isPartAFile: (fieldName, contentType, fileName) =>
      (EDIT_IMAGE_FIELDS as readonly (string | undefined)[]).includes(fieldName) ||
      fieldName === EDIT_MASK_FIELD ||
      fileName !== undefined ||
      contentType === 'application/octet-stream',
    throwFileSizeLimit: true,
  };
}

export interface ReceivedEditBody {
  /** The text fields, the first of each name. */
  fields: Record<string, string>;
  /** The images in the order sent; the caller removes their files. */
  images: ReceivedUpload[];
}

export async function receiveEditBody(
  request: FastifyRequest,
  options: { tempDir: string; maxBytes: number; maxImages: number; idleTimeoutMs: number },
): Promise<ReceivedEditBody> {
  if (!request.isMultipart())
    throw new DomainError(
      'unsupported_media_type',
      'An edit is multipart/form-data: the images as `image` or `image[]` parts.',
    );
  await mkdir(options.tempDir, { recursive: true });
  const fields: Record<string, string> = Object.create(null);
  const images: ReceivedUpload[] = [];
  const stopWatchingIdle = closeWhenIdle(request, options.idleTimeoutMs);
  try {
    const parts = request.parts();
    for (let part = await nextPart(parts); part; part = await nextPart(parts)) {
      if (part.fieldname === EDIT_MASK_FIELD)
        throw fieldError('mask', 'mask is not offered: send the images without a mask.');
      if (part.type === 'file') {
        if (!(EDIT_IMAGE_FIELDS as readonly string[]).includes(part.fieldname)) {
          // An unknown file part is ignored, as OpenAI ignores unknown fields; its bytes are read past.
          part.file.resume();
          continue;
        }
        if (images.length >= options.maxImages)
          throw fieldError('image', `An edit takes at most ${options.maxImages} images.`);
        const path = join(options.tempDir, spoolFileName());
        try {
          images.push({ path, ...(await spool(part.file, path, options.maxBytes, 'image')) });
        } catch (error) {
          await rm(path, { force: true });
          throw error;
        }
        if (images.at(-1)!.sizeBytes === 0) throw fieldError('image', `image ${images.length} is empty.`);
        continue;
      }
      if (!(part.fieldname in fields)) fields[part.fieldname] = String(part.value);
    }
  } catch (error) {
    await Promise.all(images.map((image) => rm(image.path, { force: true })));
    throw error;
  } finally {
    stopWatchingIdle();
  }
  return { fields, images };
}

function fieldError(param: string, detail: string): DomainError {
  return new DomainError('invalid_request', detail, [
    { pointer: `/${param}`, location: 'body', code: 'invalid', detail },
  ]);
}
