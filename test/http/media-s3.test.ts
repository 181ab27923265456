/**
 * The media tests (uploads, content, ETag, delete, signed URLs) once more with blobs in S3
 * (s3rver), inside `npm test`: the same file, with the blob factory switched (test/helpers/blobs.ts).
 */
process.env.TEST_BLOBS = 's3';
await import('./media.test.js');
