import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DomainError, type ErrorCode } from '../core/errors.js';
import { downloadResult } from '../generators/image-download.js';
import { GenerationError } from '../generators/port.js';
import { assertWebhookUrlAllowed, WebhookUrlRejectedError, type WebhookUrlPolicy } from '../webhooks/ssrf-guard.js';
import type { MediaRecord } from '../store/port.js';
import type { MediaService } from './media-service.js';
import { spoolFileName } from './upload-spool.js';

/** An image handed over inline (base64, optionally as a data: URL) or by an https URL to fetch. */
export type ReferenceSource = { base64: string } | { url: string };

export interface ReferenceImportOptions {
  media: MediaService;
  /** Where the bytes are spooled before MediaService checks them (DATA_DIR/tmp, swept like uploads). */
  tempDir: string;
  /** UPLOAD_MAX_BYTES: the same limit as a multipart upload. */
  maxBytes: number;
  /**
   * Where a URL may point: public addresses only (the webhook guard, checked again at connect
   * time), on the ports a webhook may use, unless allowPrivate (WEBHOOK_ALLOW_PRIVATE: tests and
   * local development).
   */
  urlPolicy: WebhookUrlPolicy;
}

/** A reference image is a few MiB at most; a server slower than this is not waited for. */
const FETCH_TIMEOUT_MS = 30_000;

const DATA_URL_PREFIX = /^data:[a-z0-9.+/-]+;base64,/i;
/** Standard or URL-safe alphabet, padding optional; whitespace (line breaks of MIME base64) is ignored. */
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

const refused = (code: ErrorCode, pointer: string, fieldCode: string, detail: string) =>
  new DomainError(code, detail, [{ pointer, location: 'body', code: fieldCode, detail }]);

/**
 * Reference images that do not arrive as a multipart upload (the MCP tool upload_reference): the
 * bytes are spooled to a file and go through MediaService.createUpload, so that the upload's
 * limits, decoding, EXIF orientation and metadata removal apply exactly as to POST /api/v1/media.
 */
export class ReferenceImport {
  constructor(private readonly options: ReferenceImportOptions) {}

  async importReference(accountId: string, source: ReferenceSource, signal: AbortSignal): Promise<MediaRecord> {
    const bytes = 'base64' in source ? this.decode(source.base64) : await this.fetch(source.url, signal);
    await mkdir(this.options.tempDir, { recursive: true });
    const path = join(this.options.tempDir, spoolFileName());
    try {
      await writeFile(path, bytes);
      return await this.options.media.createUpload(accountId, path);
    } finally {
      await rm(path, { force: true });
    }
  }

  private decode(text: string): Buffer {
    const compact = text.replace(DATA_URL_PREFIX, '').replace(/\s+/g, '');
    if (compact.length === 0 || !BASE64.test(compact))
      throw refused('invalid_request', '/image_base64', 'invalid_format', 'Must be an image encoded as base64.');
    // A base64 text decodes to 3/4 of its length: checked before decoding anything that large.
    if (Math.floor((compact.length * 3) / 4) > this.options.maxBytes + 2)
      throw refused(
        'payload_too_large',
        '/image_base64',
        'too_large',
        `The image is larger than ${this.options.maxBytes} bytes.`,
      );
    const bytes = Buffer.from(compact, compact.includes('-') || compact.includes('_') ? 'base64url' : 'base64');
    if (bytes.length > this.options.maxBytes)
      throw refused(
        'payload_too_large',
        '/image_base64',
        'too_large',
        `The image is larger than ${this.options.maxBytes} bytes.`,
      );
    return bytes;
  }

  private async fetch(url: string, signal: AbortSignal): Promise<Buffer> {
    // The guard's own words for a refused URL; downloadResult applies the same guard again, and
    // once more at connect time (DNS rebinding).
    try {
      await assertWebhookUrlAllowed(url, this.options.urlPolicy);
    } catch (error) {
      if (!(error instanceof WebhookUrlRejectedError)) throw error;
      // The guard words its refusals for webhook_url, the field it was written for.
      throw refused(
        'invalid_request',
        '/url',
        `url_${error.reason}`,
        `${error.message.replace(/^webhook_url/, 'url')}.`,
      );
    }
    try {
      return await downloadResult(url, this.options.urlPolicy, signal, {
        maxBytes: this.options.maxBytes,
        timeoutMs: FETCH_TIMEOUT_MS,
      });
    } catch (error) {
      if (!(error instanceof GenerationError)) throw error;
      if (error.code === 'upstream_invalid_image')
        throw refused(
          'payload_too_large',
          '/url',
          'too_large',
          `The image at url is larger than ${this.options.maxBytes} bytes.`,
        );
      const why = error.upstream?.status
        ? `it answered HTTP ${error.upstream.status}`
        : 'it could not be reached in time';
      throw refused('invalid_request', '/url', 'not_fetched', `The image at url was not fetched: ${why}.`);
    }
  }
}
