import t, { type Test } from 'tap';
import { GeminiGenerator } from '../../src/generators/gemini-generator.js';
import { OpenAiImagesGenerator } from '../../src/generators/openai-generator.js';
import { GenerationError, type GenerationInput, type ImageGenerator } from '../../src/generators/port.js';
import { CapacityProvider, type CapacityProviderOptions } from '../helpers/capacity-provider.js';
import { pngBase64 } from '../helpers/fake-upstream.js';

/**
 * The capacity tests' and the bench's loopback provider, driven through the real adapters: it
 * serves `capacity` calls at once, refuses the rest at once in the form each adapter reads as a
 * rate limit with its wait, and counts what it did.
 */

const input = (prompt: string, overrides: Partial<GenerationInput> = {}): GenerationInput => ({
  model: 'alpha-pro',
  prompt,
  aspectRatio: '16:9',
  resolution: '1K',
  width: 1376,
  height: 768,
  references: [],
  ...overrides,
});

async function startProvider(t: Test, options: CapacityProviderOptions): Promise<CapacityProvider> {
  const provider = await CapacityProvider.start(options);
  t.teardown(() => provider.close());
  return provider;
}

// Two tests at a time: each starts a provider of its own, and most of their time is its latency.
t.jobs = 2;

const adapters: Record<string, (url: string) => ImageGenerator> = {
  gemini: (url) =>
    new GeminiGenerator({ apiKey: 'test', baseUrl: url, model: 'gemini-3-pro-image-preview', maxConcurrency: 64 }),
  openai: (url) =>
    new OpenAiImagesGenerator({ apiKey: 'test', baseUrl: `${url}/v1`, model: 'gpt-image-1', maxConcurrency: 64 }),
};

for (const [api, adapter] of Object.entries(adapters)) {
  t.test(
    `${api}: C calls at once are served after L, the call beyond C is refused at once with its wait`,
    async (t) => {
      const provider = await startProvider(t, { capacity: 2, latencyMs: 300, retryDelay: 3 });
      const generator = adapter(provider.url);
      const outcomes = await Promise.all(
        ['one', 'two', 'three'].map((prompt) =>
          generator.generate(input(`task ${prompt}`), new AbortController().signal).then(
            (images) => ({ images }),
            (error: unknown) => ({ error }),
          ),
        ),
      );
      const served = outcomes.filter((o) => 'images' in o);
      const refused = outcomes.filter((o) => 'error' in o);
      t.equal(served.length, 2, 'two served');
      t.equal(refused.length, 1, 'one refused');
      for (const o of served)
        if ('images' in o) t.match(o.images[0], { width: 1376, height: 768, contentType: 'image/png' });
      const error = (refused[0] as { error: unknown }).error;
      t.type(error, GenerationError);
      t.match(error, { code: 'upstream_rate_limited', transient: true, retryAfterMs: 3000 }, 'read as a rate limit');
      const held = (outcome: string) =>
        provider.calls.filter((c) => c.outcome === outcome).map((c) => c.answeredAt! - c.receivedAt);
      // Date.now() is read in whole milliseconds on either side of a 300 ms timer: 299 is 300.
      t.ok(
        held('ok').every((ms) => ms >= 299),
        `the served calls were answered after the latency (${held('ok')} ms)`,
      );
      t.ok(
        held('rate_limited').every((ms) => ms < 300),
        `the refusal was answered at once (${held('rate_limited')} ms)`,
      );
      t.equal(provider.ok, 2);
      t.equal(provider.rateLimited, 1);
      t.equal(provider.peakInFlight, 2);
      t.same(provider.calls.map((c) => c.prompt).sort(), ['task one', 'task three', 'task two'], 'prompts recorded');
      t.ok(provider.calls.every((c) => c.api === api));
    },
  );

  t.test(`${api}: a slot freed is served again, and okCalls awaits the count`, async (t) => {
    // A latency long enough that the second call surely arrives while the first holds the slot.
    const provider = await startProvider(t, { capacity: 1, latencyMs: 1500 });
    const generator = adapter(provider.url);
    const first = generator.generate(input('first'), new AbortController().signal);
    await provider.received(1);
    await t.rejects(generator.generate(input('second'), new AbortController().signal), {
      code: 'upstream_rate_limited',
    });
    await first;
    await provider.okCalls(1);
    await generator.generate(input('third'), new AbortController().signal);
    t.equal(provider.ok, 2);
    t.equal(provider.rateLimited, 1);
    t.equal(provider.peakInFlight, 1);
  });

  t.test(`${api}: capacity 0 refuses every call; retryDelay null sends no wait`, async (t) => {
    const provider = await startProvider(t, { capacity: 0, latencyMs: 10, retryDelay: null });
    const generator = adapter(provider.url);
    const error = await generator.generate(input('refused'), new AbortController().signal).catch((e: unknown) => e);
    t.match(error, { code: 'upstream_rate_limited', transient: true });
    t.equal((error as GenerationError).retryAfterMs, undefined, 'no wait named');
    t.equal(provider.rateLimited, 1);
    t.equal(provider.peakInFlight, 0);
  });
}

t.test('openai: images.edit (multipart, with references) is served at the size asked', async (t) => {
  const provider = await startProvider(t, { capacity: 1, latencyMs: 10 });
  const generator = adapters.openai(provider.url);
  const reference = Buffer.from(await pngBase64(64, 64), 'base64');
  const [image] = await generator.generate(
    input('edit me', { aspectRatio: '1:1', width: 1024, height: 1024, references: [reference] }),
    new AbortController().signal,
  );
  t.match(image, { width: 1024, height: 1024 });
  t.equal(provider.calls[0].path, '/v1/images/edits');
  t.equal(provider.calls[0].prompt, 'edit me');
});

t.test('a call without an API key is refused as the provider refuses it, and counted as no call', async (t) => {
  const provider = await startProvider(t, { capacity: 1, latencyMs: 10 });
  const gemini = await fetch(`${provider.url}/v1beta/models/m:generateContent`, { method: 'POST', body: '{}' });
  t.equal(gemini.status, 403);
  const openai = await fetch(`${provider.url}/v1/images/generations`, { method: 'POST', body: '{}' });
  t.equal(openai.status, 401);
  t.equal(provider.calls.length, 0);
});
