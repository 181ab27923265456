/**
 * The task worker's tests (results stored, references read, late results and orphans deleted)
 * once more with blobs in S3 (s3rver), inside `npm test`: the same file, with the blob factory
 * switched (test/helpers/blobs.ts).
 */
process.env.TEST_BLOBS = 's3';
await import('./task-worker.test.js');
