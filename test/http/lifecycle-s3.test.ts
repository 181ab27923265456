/**
 * The lifecycle tests (image-to-image references read by the worker, every result downloaded
 * through its signed URL) once more with blobs in S3 (s3rver), inside `npm test`: the same file,
 * with the blob factory switched (test/helpers/blobs.ts).
 */
process.env.TEST_BLOBS = 's3';
await import('./lifecycle.test.js');
