/** The requests the benches send, one definition for every script. */
export const PROMPT = 'a lighthouse at dawn, seen from the sea, in watercolour';
export const CREATE_PATH = '/api/v1/images/generations';
export const ESTIMATE_PATH = '/api/v1/images/estimates';
/** The create body of the text-to-image scenarios. */
export const TEXT_TO_IMAGE = JSON.stringify({ model: 'alpha-pro', prompt: PROMPT, parameters: { aspect_ratio: '16:9', resolution: '1K' } });
