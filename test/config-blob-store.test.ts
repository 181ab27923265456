import t from 'tap';
import { S3BlobStore } from '../src/blobs/s3-blob-store.js';
import { ConfigError, loadConfig, s3KeyPrefix } from '../src/config.js';
import { openBlobStore } from '../src/runtime.js';

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return '';
}

const S3 = { BLOB_STORE: 's3', S3_BUCKET: 'imagegen-blobs', S3_REGION: 'auto' };

t.test('BLOB_STORE=s3 with its settings opens the S3 adapter; fs stays the default', async (t) => {
  const config = loadConfig({ ...S3, S3_ENDPOINT: 'https://acct.r2.cloudflarestorage.com', S3_PREFIX: 'imagegen' });
  t.equal(config.S3_FORCE_PATH_STYLE, false);
  t.equal(config.S3_PRESIGNED_DOWNLOADS, false);
  t.equal(config.S3_PRESIGNED_URL_TTL_SECONDS, 300);
  t.equal(s3KeyPrefix(config), 'imagegen/');
  t.type(await openBlobStore(config), S3BlobStore);
  t.notOk((await openBlobStore(loadConfig({}))) instanceof S3BlobStore);
});

t.test('BLOB_STORE=s3 without a bucket or region stops the start naming the variable', async (t) => {
  t.equal(
    configError({ BLOB_STORE: 's3', S3_REGION: 'eu-west-1' }),
    'Missing environment variable S3_BUCKET: BLOB_STORE=s3 needs it.',
  );
  t.equal(
    configError({ BLOB_STORE: 's3', S3_BUCKET: 'b-1' }),
    'Missing environment variable S3_REGION: BLOB_STORE=s3 needs it.',
  );
});

t.test('bad S3 values stop the start naming the variable', async (t) => {
  t.match(configError({ ...S3, S3_BUCKET: 'Not_A_Bucket' }), /^Invalid environment variable S3_BUCKET=/);
  t.match(configError({ ...S3, S3_ENDPOINT: 'minio:9000' }), /^Invalid environment variable S3_ENDPOINT=/);
  t.match(
    configError({ ...S3, S3_ENDPOINT: 'http://minio:9000/bucket' }),
    /^Invalid environment variable S3_ENDPOINT=/,
  );
  t.match(
    configError({ ...S3, S3_FORCE_PATH_STYLE: 'yes please' }),
    /^Invalid environment variable S3_FORCE_PATH_STYLE=/,
  );
  for (const prefix of ['/imagegen', 'a//b', '../x', 'a\\b', '.hidden/'])
    t.match(configError({ ...S3, S3_PREFIX: prefix }), /^Invalid environment variable S3_PREFIX=/, prefix);
  t.match(
    configError({ ...S3, S3_PRESIGNED_URL_TTL_SECONDS: '0' }),
    /^Invalid environment variable S3_PRESIGNED_URL_TTL_SECONDS=/,
  );
});

t.test('presigned downloads need the S3 adapter', async (t) => {
  t.equal(
    configError({ S3_PRESIGNED_DOWNLOADS: 'true' }),
    'Invalid environment variable S3_PRESIGNED_DOWNLOADS=true: it needs BLOB_STORE=s3 (BLOB_STORE=fs).',
  );
  t.equal(loadConfig({ ...S3, S3_PRESIGNED_DOWNLOADS: 'true' }).S3_PRESIGNED_DOWNLOADS, true);
});

t.test('a prefix keeps its one trailing slash', async (t) => {
  t.equal(s3KeyPrefix(loadConfig({ ...S3, S3_PREFIX: 'env/prod/' })), 'env/prod/');
  t.equal(s3KeyPrefix(loadConfig(S3)), '');
});
