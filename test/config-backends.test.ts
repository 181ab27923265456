import t from 'tap';
import { ConfigError, loadConfig, modelBackends, openAiKeyHeader, upstreamModels } from '../src/config.js';

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

t.test(
  'OPENAI_IMAGE_QUALITY: a value every model on openai takes, anything else stops the start naming it',
  async (t) => {
    const openai = (model: string, more: Record<string, string> = {}) => ({
      BETA_V5_PRO_BACKEND: 'openai',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_IMAGE_MODEL: model,
      ...more,
    });
    t.equal(loadConfig({}).OPENAI_IMAGE_QUALITY, undefined, 'unset: not sent');
    for (const quality of ['low', 'medium', 'high', 'auto'])
      t.equal(loadConfig(openai('gpt-image-1', { OPENAI_IMAGE_QUALITY: quality })).OPENAI_IMAGE_QUALITY, quality);
    t.equal(loadConfig(openai('dall-e-3', { OPENAI_IMAGE_QUALITY: 'hd' })).OPENAI_IMAGE_QUALITY, 'hd');
    t.equal(
      configError(openai('gpt-image-1', { OPENAI_IMAGE_QUALITY: 'hd' })),
      'Invalid environment variable OPENAI_IMAGE_QUALITY="hd": gpt-image-1 (serving beta-v5-pro) takes low, medium, high, auto',
    );
    t.equal(
      configError(openai('dall-e-3', { OPENAI_IMAGE_QUALITY: 'high' })),
      'Invalid environment variable OPENAI_IMAGE_QUALITY="high": dall-e-3 (serving beta-v5-pro) takes standard, hd',
    );
    t.match(
      configError(openai('dall-e-2', { OPENAI_IMAGE_QUALITY: 'hd' })),
      /dall-e-2 \(serving beta-v5-pro\) takes standard$/,
    );
    t.match(
      configError(openai('flux-pro', { OPENAI_IMAGE_QUALITY: 'high' })),
      /^Invalid environment variable OPENAI_IMAGE_QUALITY="high": flux-pro \(serving beta-v5-pro\) takes no quality/,
    );
    t.match(
      configError(openai('prod-images', { OPENAI_MODEL_FAMILY: 'gpt-image', OPENAI_IMAGE_QUALITY: 'standard' })),
      /prod-images \(serving beta-v5-pro\) takes low, medium, high, auto/,
      'by OPENAI_MODEL_FAMILY when the name says nothing',
    );
    t.match(
      configError(
        openai('gpt-image-1', {
          ALPHA_PRO_BACKEND: 'openai',
          ALPHA_PRO_UPSTREAM_MODEL: 'dall-e-3',
          OPENAI_IMAGE_QUALITY: 'high',
        }),
      ),
      /dall-e-3 \(serving alpha-pro\) takes standard, hd/,
      'every model on the backend',
    );
  },
);

t.test('OPENAI_API_KEY_HEADER: api-key for an Azure OpenAI host unless set, authorization elsewhere', async (t) => {
  const header = (env: Record<string, string>) => openAiKeyHeader(loadConfig(env));
  t.equal(header({}), 'authorization');
  t.equal(header({ OPENAI_BASE_URL: 'https://api.openai.com/v1' }), 'authorization');
  t.equal(header({ OPENAI_BASE_URL: 'https://my-resource.openai.azure.com/openai/v1/' }), 'api-key');
  t.equal(header({ OPENAI_BASE_URL: 'https://my-resource.cognitiveservices.azure.com/openai/v1/' }), 'api-key');
  t.equal(
    header({ OPENAI_BASE_URL: 'https://azure-proxy.example.com/v1', OPENAI_API_KEY_HEADER: 'api-key' }),
    'api-key',
  );
  t.equal(
    header({
      OPENAI_BASE_URL: 'https://my-resource.openai.azure.com/openai/v1/',
      OPENAI_API_KEY_HEADER: 'authorization',
    }),
    'authorization',
  );
  t.match(configError({ OPENAI_API_KEY_HEADER: 'x-api-key' }), /^Invalid environment variable OPENAI_API_KEY_HEADER/);
});

t.test(
  'GEMINI_VERTEX_PROJECT: gemini on Vertex AI needs no GEMINI_API_KEY; the location defaults to global',
  async (t) => {
    t.match(configError({ ALPHA_PRO_BACKEND: 'gemini' }), /^Missing environment variable GEMINI_API_KEY/);
    const config = loadConfig({ ALPHA_PRO_BACKEND: 'gemini', GEMINI_VERTEX_PROJECT: 'my-project' });
    t.equal(config.GEMINI_VERTEX_LOCATION, 'global');
    t.equal(loadConfig({ GEMINI_VERTEX_LOCATION: 'europe-west4' }).GEMINI_VERTEX_LOCATION, 'europe-west4');
  },
);

t.test('a base URL with http:// to a host other than loopback stops the start, naming the variable', async (t) => {
  t.match(
    configError({ OPENAI_BASE_URL: 'http://images.example.com/v1' }),
    /^Invalid environment variable OPENAI_BASE_URL="http:\/\/images.example.com\/v1": http:\/\/ is allowed to a loopback host only/,
  );
  t.match(configError({ GEMINI_BASE_URL: 'http://10.0.0.5:8080' }), /^Invalid environment variable GEMINI_BASE_URL=/);
  for (const fine of ['https://images.example.com/v1', 'http://127.0.0.1:9/v1', 'http://localhost:9', 'http://[::1]:9'])
    t.equal(configError({ OPENAI_BASE_URL: fine }), '', fine);
});

t.test('MAX_UPSCALE and BACKEND_UNAVAILABLE_COOLDOWN_MS: defaults, and bounds', async (t) => {
  const config = loadConfig({});
  t.equal(config.MAX_UPSCALE, 2);
  t.equal(config.BACKEND_UNAVAILABLE_COOLDOWN_MS, 60_000);
  t.equal(loadConfig({ MAX_UPSCALE: '1.5' }).MAX_UPSCALE, 1.5);
  t.match(configError({ MAX_UPSCALE: '0.5' }), /^Invalid environment variable MAX_UPSCALE/);
  t.match(configError({ OPENAI_MODEL_FAMILY: 'flux' }), /^Invalid environment variable OPENAI_MODEL_FAMILY/);
});

t.test('the upstream model of each catalog model: its own variable, else the backend’s', async (t) => {
  const config = loadConfig({
    ALPHA_PRO_BACKEND: 'gemini',
    GEMINI_API_KEY: 'g',
    BETA_V5_PRO_BACKEND: 'gemini',
    BETA_V5_PRO_UPSTREAM_MODEL: 'gemini-3.1-flash-image-preview',
  });
  t.same(upstreamModels(config), {
    'alpha-pro': 'gemini-3-pro-image-preview',
    'beta-v5-pro': 'gemini-3.1-flash-image-preview',
  });
  t.same(upstreamModels(loadConfig({})), {}, 'none on the local renderer');
});
