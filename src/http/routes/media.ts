import { rm } from 'node:fs/promises';
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IMAGE_CONTENT_TYPES, MediaEnvelope } from '../../../schemas/resources.js';
import { EXAMPLE_MEDIA_ID } from '../../../schemas/primitives.js';
import { DomainError } from '../../core/errors.js';
import type { MediaService } from '../../services/media-service.js';
import type { ConnectionSlots } from '../../services/connection-slots.js';
import type { MediaRecord } from '../../services/media-service.js';
import { requestFingerprint } from '../../services/idempotency.js';
import { sendMediaContent } from '../media-content.js';
import { receiveSingleFile, UPLOAD_FIELD, uploadParserOptions } from '../multipart-upload.js';
import type { Caller } from '../plugins/auth.js';
import { SignedUrlQueryFields, signedUrlExpiry } from '../signed-url.js';
import { IdempotencyKeyHeaders } from '../plugins/idempotency.js';
import { toMediaResource } from '../../presenters/resources.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  ETAG,
  IDEMPOTENT_REPLAYED,
  JSON_BODY_CODES,
  LOCATION,
  apiEmpty,
  apiHeaders,
  apiSuccess,
  canonicalId,
  problemResponses,
  uuidParam,
} from '../route-schemas.js';

export interface SignedUrlVerifier {
  verify(mediaId: string, expires: number, signature: string, now: Date): boolean;
}

export interface MediaRoutesOptions {
  media: MediaService;
  signer: SignedUrlVerifier;
  now: () => Date;
  /** Where uploads are spooled before they are checked (DATA_DIR/tmp). */
  uploadTempDir: string;
  uploadMaxBytes: number;
  /** A stalled upload body's connection is closed after this much silence. */
  uploadIdleTimeoutMs: number;
  /** Caps uploads in flight per process and per key. */
  uploadSlots: ConnectionSlots;
  /** Bounds how long a client may cache content fetched with the Bearer key (as long as a signed URL lives). */
  signedUrlTtlSeconds: number;
}

const MediaIdParams = uuidParam(
  'media_id',
  'The media_id returned by the upload, or of a generated item (either case).',
  EXAMPLE_MEDIA_ID,
);

const SignedUrlQuery = Type.Object(SignedUrlQueryFields, { additionalProperties: false });

/** Image bytes in a response. */
const BINARY = { type: 'string', format: 'binary', maxLength: 2_147_483_647 };
/**
 * The upload's file part, as OpenAPI 3.1 writes binary content: `contentMediaType` and no `type`.
 * Swagger UI shows a file picker for it, and openapi-typescript types it `unknown`, which a Blob
 * or File satisfies (a `type: string, format: binary` part would become `string`).
 */
const UPLOAD_FILE_PART = {
  type: 'string',
  format: 'binary',
  // The bytes of at most UPLOAD_MAX_BYTES; the schema states the bound no configuration exceeds.
  maxLength: 2_147_483_647,
  contentMediaType: 'application/octet-stream',
  description: 'The image: PNG, JPEG or WebP.',
};

/** A presigned URL: the object's URL with its signature, credential scope and response headers in the query. */
const PRESIGNED_LOCATION = {
  Location: {
    type: 'string',
    format: 'uri',
    maxLength: 8192,
    description: 'Presigned URL of the object, valid for minutes; not to be stored.',
  },
} as const;

const ACCEPT_RANGES = {
  'Accept-Ranges': { type: 'string', enum: ['bytes'], description: 'One byte range may be asked for.' },
} as const;
const CONTENT_RANGE = {
  'Content-Range': {
    type: 'string',
    maxLength: 40,
    pattern: '^bytes [0-9]+-[0-9]+/[0-9]+$',
    description: 'The range sent and the whole size: `bytes <first>-<last>/<size>`.',
  },
} as const;

const UPLOAD_SLOT_RETRY_AFTER_SECONDS = 1;

/** Accepts anything: the multipart body is streamed and checked by the handler, never parsed into request.body. */
const streamedBodyValidator = () => () => true;

export const mediaRoutes: FastifyPluginAsyncTypebox<MediaRoutesOptions> = async (app, options) => {
  const { media, signer, now } = options;

  // The upload lives in its own scope, the only one that parses multipart/form-data; JSON is not
  // parsed here either, so any other body is a 415 before a byte of it is read.
  await app.register(async (uploads) => {
    uploads.removeAllContentTypeParsers();
    await uploads.register(multipart, uploadParserOptions(options.uploadMaxBytes));

    uploads.post(
      '/media',
      {
        config: { idempotent: 'manual' },
        validatorCompiler: streamedBodyValidator,
        schema: {
          operationId: 'uploadMedia',
          tags: ['media'],
          summary: 'Upload an image for image-to-image references',
          description: [
            `multipart/form-data with exactly one part, named \`${UPLOAD_FIELD}\`, of at most ${options.uploadMaxBytes} bytes.`,
            'PNG, JPEG and WebP are accepted, recognised by their bytes (the filename and declared type are ignored).',
            'The image is fully decoded before it is accepted; EXIF orientation is applied and all metadata',
            '(EXIF, GPS, XMP, ICC) is removed from what is stored. Uploads expire; see `expires_at`.',
          ].join(' '),
          security: BEARER_SECURITY,
          consumes: ['multipart/form-data'],
          headers: IdempotencyKeyHeaders,
          body: Type.Object(
            { [UPLOAD_FIELD]: Type.Unsafe<unknown>(UPLOAD_FILE_PART) },
            { required: [UPLOAD_FIELD], additionalProperties: false },
          ),
          response: {
            201: apiSuccess(Type.Ref(MediaEnvelope), 'Stored; `Location` points at the media record.', {
              ...LOCATION('Path of the media record.'),
              ...IDEMPOTENT_REPLAYED,
            }),
            ...problemResponses([
              ...AUTHENTICATED_CODES,
              'payload_too_large',
              'unsupported_media_type',
              'idempotency_in_progress',
              'invalid_image',
              'idempotency_key_reused',
              'rate_limited',
              'unavailable',
            ]),
          },
        },
      },
      async (request, reply) => {
        const slot = options.uploadSlots.acquire(request.caller.keyId);
        if ('refused' in slot) {
          // Refused before a byte of the body is read: the connection is closed rather than drained.
          reply.header('connection', 'close').header('retry-after', UPLOAD_SLOT_RETRY_AFTER_SECONDS);
          throw slot.refused === 'key'
            ? new DomainError(
                'rate_limited',
                'This API key has as many uploads in flight as it may; wait for one to finish.',
              )
            : new DomainError(
                'unavailable',
                'This server is receiving as many uploads as it takes at once; retry shortly.',
              );
        }
        try {
          return await receiveAndStore(request, reply);
        } finally {
          slot.release();
        }
      },
    );
  });

  async function receiveAndStore(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    let upload: Awaited<ReturnType<typeof receiveSingleFile>>;
    try {
      upload = await receiveSingleFile(request, {
        tempDir: options.uploadTempDir,
        maxBytes: options.uploadMaxBytes,
        idleTimeoutMs: options.uploadIdleTimeoutMs,
      });
    } catch (error) {
      // The rest of the body may still be on its way; closing is cheaper than reading it.
      reply.header('connection', 'close');
      throw error;
    }
    let created: MediaRecord | null = null;
    try {
      const fingerprint = requestFingerprint('POST', '/api/v1/media', upload.sha256);
      // false: the first response to this Idempotency-Key has been replayed on reply.
      const claimed = (await request.idempotency?.claim(reply, fingerprint)) ?? true;
      if (claimed) created = await media.createUpload(request.caller.accountId, upload.path);
    } finally {
      await rm(upload.path, { force: true });
    }
    if (!created) return reply;
    reply.header('location', `/api/v1/media/${created.id}`);
    return reply.code(201).send({ data: toMediaResource(created) });
  }

  app.get(
    '/media/:media_id',
    {
      schema: {
        operationId: 'getMedia',
        tags: ['media'],
        summary: 'Read a media record',
        description: 'An upload or a generated image of this account, until it expires.',
        security: BEARER_SECURITY,
        params: MediaIdParams,
        response: {
          200: apiSuccess(Type.Ref(MediaEnvelope), 'The media record.'),
          ...problemResponses([...AUTHENTICATED_CODES, 'not_found']),
        },
      },
    },
    async (request) => ({
      data: toMediaResource(await media.get(request.caller.accountId, canonicalId(request.params.media_id))),
    }),
  );

  app.get(
    '/media/:media_id/content',
    {
      config: { auth: 'bearer-or-signature' },
      schema: {
        operationId: 'getMediaContent',
        tags: ['media'],
        summary: 'Download the image bytes',
        description: [
          "With the owner's Bearer key, or without any key through a signed URL (the `url` of a generated item):",
          'when `expires` and `signature` are present they alone decide, and an expired or altered URL is a 401.',
          'The ETag is the quoted sha256; `If-None-Match` gives 304. Cache lifetimes never outlast the media or the URL.',
          'One byte range may be asked for (`Range: bytes=…`, with `If-Range` = the ETag): 206, or 416 outside the content;',
          'several ranges are answered with the whole content.',
          'Where the server keeps media in S3 with presigned downloads on, the answer is a 302 to a short-lived',
          'presigned URL of the object store instead, which serves the same bytes and headers (and ranges).',
        ].join(' '),
        security: [...BEARER_SECURITY, {}],
        params: MediaIdParams,
        querystring: SignedUrlQuery,
        response: {
          200: {
            description: 'The stored image.',
            headers: apiHeaders({ ...ETAG, ...ACCEPT_RANGES }),
            content: Object.fromEntries(IMAGE_CONTENT_TYPES.map((type) => [type, { schema: BINARY }])),
          },
          206: {
            description: 'The byte range asked for by `Range`.',
            headers: apiHeaders({ ...ETAG, ...ACCEPT_RANGES, ...CONTENT_RANGE }),
            content: Object.fromEntries(IMAGE_CONTENT_TYPES.map((type) => [type, { schema: BINARY }])),
          },
          302: apiEmpty(
            'The content is served by the object store: `Location` is a short-lived presigned URL (S3_PRESIGNED_DOWNLOADS).',
            { ...ETAG, ...PRESIGNED_LOCATION },
          ),
          304: apiEmpty('Not modified: `If-None-Match` matched the ETag.', ETAG),
          ...problemResponses([...AUTHENTICATED_CODES, 'not_found', 'range_not_satisfiable']),
        },
      },
    },
    async (request, reply) => {
      const at = now();
      const mediaId = canonicalId(request.params.media_id);
      let found: MediaRecord;
      let accessEndsAt: Date;
      const expiresSeconds = signedUrlExpiry(request.query, at, (expires, signature) =>
        signer.verify(mediaId, expires, signature, at),
      );
      if (expiresSeconds !== null) {
        found = await media.getForSignedAccess(mediaId);
        accessEndsAt = new Date(expiresSeconds * 1000);
      } else {
        // Auth let this route through without a key so that signed URLs work; without a signature the key is required.
        const caller = request.caller as Caller | null;
        if (!caller)
          throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>, or use a signed URL.');
        found = await media.get(caller.accountId, mediaId);
        // A key read is cached no longer than a signed URL would live.
        accessEndsAt = new Date(at.getTime() + options.signedUrlTtlSeconds * 1000);
      }
      return sendMediaContent(request, reply, found, { media, at, accessEndsAt });
    },
  );

  app.delete(
    '/media/:media_id',
    {
      schema: {
        operationId: 'deleteMedia',
        tags: ['media'],
        summary: 'Delete an upload or a generated image',
        description:
          'Access ends at once (record, content, signed URLs, new references); the bytes are removed right after.',
        security: BEARER_SECURITY,
        params: MediaIdParams,
        response: {
          204: apiEmpty('Deleted.'),
          ...problemResponses([...AUTHENTICATED_CODES, ...JSON_BODY_CODES, 'not_found']),
        },
      },
    },
    async (request, reply) => {
      await media.delete(request.caller.accountId, canonicalId(request.params.media_id));
      return reply.code(204).send();
    },
  );
};
