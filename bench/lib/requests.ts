/** The requests the benches send, one definition for every script. */
export const PROMPT = 'a lighthouse at dawn, seen from the sea, in watercolour';
export const CREATE_PATH = '/api/v1/images/generations';
/** The create body of the text-to-image scenarios. */
export const TEXT_TO_IMAGE = JSON.stringify({
  model: 'alpha-pro',
  prompt: PROMPT,
  parameters: { aspect_ratio: '16:9', resolution: '1K' },
});
/** The create body of a 1:1 text-to-image task at a resolution, its prompt numbered (for the worker scenarios). */
export const textToImage = (resolution: '1K' | '2K' | '4K', n = 0, model = 'alpha-pro') =>
  JSON.stringify({ model, prompt: `${PROMPT} #${n}`, parameters: { aspect_ratio: '1:1', resolution } });
