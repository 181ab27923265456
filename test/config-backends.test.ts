import t from 'tap';
import { ConfigError, loadConfig, modelBackends } from '../src/config.js';

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return '';
}

t.test('every model is on the local renderer unless told otherwise', async (t) => {
  t.same(modelBackends(loadConfig({})), { 'alpha-pro': 'local', 'beta-v5-pro': 'local' });
});

t.test('a backend per model, with its settings and defaults', async (t) => {
  const config = loadConfig({
    ALPHA_PRO_BACKEND: 'gemini',
    GEMINI_API_KEY: 'g',
    BETA_V5_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'o',
    OPENAI_IMAGE_MODEL: 'gpt-image-2',
  });
  t.same(modelBackends(config), { 'alpha-pro': 'gemini', 'beta-v5-pro': 'openai' });
  t.equal(config.GEMINI_MODEL, 'gemini-3-pro-image-preview');
  t.equal(config.GEMINI_MAX_CONCURRENCY, 64, 'a ceiling: the working limit adapts below it');
  t.equal(config.OPENAI_MAX_CONCURRENCY, 64);
  t.equal(config.GEMINI_BASE_URL, undefined);
});

t.test('a backend without its key stops the start naming the variable', async (t) => {
  t.equal(
    configError({ ALPHA_PRO_BACKEND: 'gemini' }),
    'Missing environment variable GEMINI_API_KEY: ALPHA_PRO_BACKEND=gemini needs it.',
  );
  t.equal(
    configError({ BETA_V5_PRO_BACKEND: 'openai', OPENAI_IMAGE_MODEL: 'm' }),
    'Missing environment variable OPENAI_API_KEY: BETA_V5_PRO_BACKEND=openai needs it.',
  );
  t.equal(
    configError({ BETA_V5_PRO_BACKEND: 'openai', OPENAI_API_KEY: 'k' }),
    'Missing environment variable OPENAI_IMAGE_MODEL: BETA_V5_PRO_BACKEND=openai needs it.',
  );
});

t.test('an unknown backend or a bad base URL or cap names the variable', async (t) => {
  t.match(configError({ ALPHA_PRO_BACKEND: 'dalle' }), /^Invalid environment variable ALPHA_PRO_BACKEND="dalle"/);
  t.match(configError({ GEMINI_BASE_URL: 'ftp://x' }), /^Invalid environment variable GEMINI_BASE_URL/);
  t.match(configError({ OPENAI_MAX_CONCURRENCY: '0' }), /^Invalid environment variable OPENAI_MAX_CONCURRENCY/);
});

t.test('the messages never echo a key', async (t) => {
  const message = configError({
    ALPHA_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'sk-very-secret',
    GEMINI_API_KEY: 'AIza-secret',
  });
  t.notMatch(message, /secret/);
});

t.test('OPENAI_IMAGE_SIZES: exact or a list of WIDTHxHEIGHT, anything else stops the start', async (t) => {
  t.equal(loadConfig({}).OPENAI_IMAGE_SIZES, undefined, 'unset: by the model name');
  t.equal(loadConfig({ OPENAI_IMAGE_SIZES: 'exact' }).OPENAI_IMAGE_SIZES, 'exact');
  t.equal(loadConfig({ OPENAI_IMAGE_SIZES: '1024x1024, 1344x768' }).OPENAI_IMAGE_SIZES, '1024x1024, 1344x768');
  for (const bad of ['auto', '1024', '1024x1024,', '0x512', '1024*1024', 'exact,1024x1024']) {
    t.equal(
      configError({ OPENAI_IMAGE_SIZES: bad }),
      `Invalid environment variable OPENAI_IMAGE_SIZES=${JSON.stringify(bad)}: expected exact or comma-separated WIDTHxHEIGHT sizes, e.g. 1024x1024,1536x1024,1024x1536`,
      bad,
    );
  }
});
