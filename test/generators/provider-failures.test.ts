import t from 'tap';
import { GeminiGenerator } from '../../src/generators/gemini-generator.js';
import { OpenAiImagesGenerator } from '../../src/generators/openai-generator.js';
import { GenerationError, type GenerationInput, type ImageGenerator } from '../../src/generators/port.js';
import { FakeUpstream } from '../helpers/fake-upstream.js';
import { GEMINI_FAILURES, OPENAI_FAILURES, type DocumentedFailure } from '../helpers/provider-failures.js';

/**
 * Every documented failure of each provider (test/helpers/provider-failures.ts), answered by the
 * loopback fake, against its adapter: the GenerationError the worker decides on. The provider's
 * own text never reaches the error's message.
 */
const input: GenerationInput = {
  model: 'alpha-pro',
  prompt: 'a lighthouse on a cliff at dusk',
  aspectRatio: '1:1',
  resolution: '1K',
  width: 1024,
  height: 1024,
  references: [],
};

const adapters: { name: string; rows: DocumentedFailure[]; make: (url: string) => ImageGenerator }[] = [
  {
    name: 'gemini',
    rows: GEMINI_FAILURES,
    make: (url) =>
      new GeminiGenerator({ apiKey: 'k', baseUrl: url, model: 'gemini-3-pro-image-preview', maxConcurrency: 4 }),
  },
  {
    name: 'openai',
    rows: OPENAI_FAILURES,
    make: (url) =>
      new OpenAiImagesGenerator({ apiKey: 'k', baseUrl: `${url}/v1`, model: 'gpt-image-1', maxConcurrency: 4 }),
  },
];

for (const adapter of adapters) {
  t.test(adapter.name, async (t) => {
    const upstream = await FakeUpstream.start(t);
    const generator = adapter.make(upstream.url);
    for (const row of adapter.rows) {
      t.test(row.name, async (t) => {
        upstream.replyWith(row.reply);
        const before = upstream.requests.length;
        const error = await generator.generate(input, new AbortController().signal).then(
          () => undefined,
          (e: unknown) => e,
        );
        t.type(error, GenerationError, row.source);
        const failure = error as GenerationError;
        t.same(
          {
            code: failure.code,
            transient: failure.transient,
            capacity: failure.capacity,
            retryAfterMs: failure.retryAfterMs,
            maxAttempts: failure.maxAttempts,
          },
          { retryAfterMs: undefined, maxAttempts: undefined, ...row.expect },
          row.source,
        );
        t.equal(upstream.requests.length - before, 1, 'one call, no SDK retry');
        t.equal(upstream.refused.length, 0, 'no request the provider refuses');
        const providerText = JSON.stringify(row.reply.json);
        t.notOk(providerText.includes(failure.message), 'our message, not the provider’s');
      });
    }
  });
}
