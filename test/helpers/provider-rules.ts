import type { JsonReply } from './fake-upstream.js';
import { geminiReply, openAiReply } from './provider-replies.js';

/**
 * What the real providers refuse, for the loopback fakes: a request our adapters should never
 * send gets the provider's documented 400, so a regression fails the tests as it would fail in
 * production. Written from the providers' documentation, independently of src/core/size-plan.ts
 * (which decides what to send): the tests check one against the other.
 *
 * OpenAI images API `size` (the API reference, as the official `openai` SDK 6.x documents it):
 * gpt-image-2: WIDTHxHEIGHT, both multiples of 16, long edge ≤ 3 × short edge, edges ≤ 3840,
 * 655 360 ≤ pixels ≤ 3840×2160, or `auto`; the other GPT image models: 1024x1024, 1536x1024,
 * 1024x1536 or `auto`; dall-e-3: 1024x1024, 1792x1024, 1024x1792; dall-e-2: 256x256, 512x512,
 * 1024x1024. A refused value is 400 {error: {message: "Invalid value: '…'. Supported values are:
 * …", type: 'invalid_request_error', param: 'size', code: 'invalid_value'}}. Other model names
 * stand for compatible providers that take any WIDTHxHEIGHT.
 *
 * `quality` per family: see OPENAI_QUALITIES below; a refused value is the same invalid_value 400.
 *
 * The GPT image models also refuse `response_format` (they always answer in base64): 400
 * {…, param: 'response_format', code: 'unknown_parameter'}; the DALL·E models refuse `stream` alike.
 *
 * Gemini API imageConfig (https://ai.google.dev/gemini-api/docs/image-generation): aspectRatio one
 * of ten ratios; imageSize 1K, 2K or 4K, taken by Gemini 3 Pro Image and Gemini 3.1 Flash Image
 * only. A refused value is 400 google.rpc.Status {error: {code: 400, message, status: 'INVALID_ARGUMENT'}}.
 */
const OPENAI_FIXED_SIZES: Record<string, string[]> = {
  'dall-e-2': ['256x256', '512x512', '1024x1024'],
  'dall-e-3': ['1024x1024', '1792x1024', '1024x1792'],
  'gpt-image': ['1024x1024', '1024x1536', '1536x1024', 'auto'],
};

const GEMINI_ASPECT_RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const GEMINI_MODELS_WITH_IMAGE_SIZE = /^gemini-3(\.1-flash|-pro)-image/;

/** Why OpenAI would refuse `size` for `model`, or null when it takes it. */
export function openAiSizeRefusal(model: string, size: unknown): JsonReply | null {
  if (size === undefined || size === null) return null;
  const value = String(size);
  if (model.startsWith('gpt-image-2')) {
    if (value === 'auto') return null;
    const match = /^(\d+)x(\d+)$/.exec(value);
    const [width, height] = match ? [Number(match[1]), Number(match[2])] : [0, 0];
    const fits =
      width > 0 &&
      width % 16 === 0 &&
      height % 16 === 0 &&
      Math.max(width, height) <= 3 * Math.min(width, height) &&
      Math.max(width, height) <= 3840 &&
      width * height >= 655_360 &&
      width * height <= 3840 * 2160;
    return fits
      ? null
      : invalidSize(
          value,
          'WIDTHxHEIGHT with both edges multiples of 16, an aspect ratio between 1:3 and 3:1, edges up to 3840 and 655360 to 8294400 pixels, or auto',
        );
  }
  const family = model.startsWith('gpt-image-') || model.startsWith('chatgpt-image-') ? 'gpt-image' : model;
  const supported = OPENAI_FIXED_SIZES[family];
  if (supported) {
    return supported.includes(value) ? null : invalidSize(value, supported.map((s) => `'${s}'`).join(', '));
  }
  return /^\d+x\d+$/.test(value) || value === 'auto' ? null : invalidSize(value, 'WIDTHxHEIGHT');
}

/** A GPT image model, by name (a router's `provider/` prefix aside). */
const isGptImageModel = (model: string) => /^(gpt-image-|chatgpt-image-)/.test(model.slice(model.lastIndexOf('/') + 1));

/** The GPT image models always answer in base64 and refuse `response_format`. */
export function openAiResponseFormatRefusal(model: string, responseFormat: unknown): JsonReply | null {
  if (responseFormat === undefined || responseFormat === null) return null;
  return isGptImageModel(model) ? unknownParameter('response_format') : null;
}

/**
 * `stream` is taken by the GPT image models only ("This parameter is only supported for the GPT
 * image models", the images API reference as the `openai` SDK documents it); the DALL·E models
 * refuse it.
 */
export function openAiStreamRefusal(model: string, stream: unknown): JsonReply | null {
  if (stream === undefined || stream === null) return null;
  return model.startsWith('dall-e-') ? unknownParameter('stream') : null;
}

function unknownParameter(param: string): JsonReply {
  return openAiReply.error(400, {
    message: `Unknown parameter: '${param}'.`,
    type: 'invalid_request_error',
    param,
    code: 'unknown_parameter',
  });
}

function invalidSize(value: string, supported: string): JsonReply {
  return invalidValue('size', value, supported);
}

function invalidValue(param: string, value: string, supported: string): JsonReply {
  return openAiReply.error(400, {
    message: `Invalid value: '${value}'. Supported values are: ${supported}.`,
    type: 'invalid_request_error',
    param,
    code: 'invalid_value',
  });
}

/**
 * `quality` (the images API reference, as the `openai` SDK documents it): the GPT image models take
 * low, medium, high and auto; dall-e-3 standard and hd; dall-e-2 standard only. Other names stand
 * for compatible providers, which take what they like.
 */
const OPENAI_QUALITIES: [test: (model: string) => boolean, values: string[]][] = [
  [isGptImageModel, ['low', 'medium', 'high', 'auto']],
  [(model) => model.startsWith('dall-e-3'), ['standard', 'hd']],
  [(model) => model.startsWith('dall-e-2'), ['standard']],
];

/** Why OpenAI would refuse `quality` for `model`, or null when it takes it. */
export function openAiQualityRefusal(model: string, quality: unknown): JsonReply | null {
  if (quality === undefined || quality === null) return null;
  const supported = OPENAI_QUALITIES.find(([test]) => test(model))?.[1];
  if (!supported || supported.includes(String(quality))) return null;
  return invalidValue('quality', String(quality), supported.map((q) => `'${q}'`).join(', '));
}

/** Why Gemini would refuse `imageConfig` for `model`, or null when it takes it. */
export function geminiImageConfigRefusal(model: string, imageConfig: unknown): JsonReply | null {
  if (imageConfig === undefined) return null;
  const { aspectRatio, imageSize, ...other } = imageConfig as Record<string, unknown>;
  if (Object.keys(other).length > 0) {
    return invalidArgument(
      `Invalid JSON payload received. Unknown name "${Object.keys(other)[0]}" at 'generation_config.image_config'.`,
    );
  }
  if (aspectRatio !== undefined && !GEMINI_ASPECT_RATIOS.includes(String(aspectRatio))) {
    return invalidArgument(`Unsupported aspect ratio: ${String(aspectRatio)}.`);
  }
  if (imageSize !== undefined) {
    if (!GEMINI_MODELS_WITH_IMAGE_SIZE.test(model)) return invalidArgument(`Image size is not supported by ${model}.`);
    if (!['1K', '2K', '4K'].includes(String(imageSize))) {
      return invalidArgument(`Unsupported image size: ${String(imageSize)}. Supported values are 1K, 2K, 4K.`);
    }
  }
  return null;
}

function invalidArgument(message: string): JsonReply {
  return geminiReply.error(400, 'INVALID_ARGUMENT', message);
}

const GEMINI_MAX_REQUEST_BYTES = 20 * 1024 * 1024;
/**
 * Per inline image: 7 MB, Vertex AI's documented limit for Gemini 3 Pro Image
 * (https://cloud.google.com/vertex-ai/generative-ai/docs/models/gemini/3-pro-image), held to here
 * for the Gemini API too, as the service does (decision 0011).
 */
const GEMINI_MAX_INLINE_IMAGE_BYTES = 7_000_000;
const GEMINI_PATH = /^\/v1beta\/models\/([^/:]+):generateContent$/;
/**
 * Vertex AI's generateContent for a Google model
 * (https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1beta1/projects.locations.publishers.models/generateContent):
 * the same body and errors, authenticated by an OAuth 2 access token (`Authorization: Bearer`);
 * without one, 401 UNAUTHENTICATED.
 */
const VERTEX_PATH =
  /^\/v1beta1\/projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/models\/([^/:]+):generateContent$/;
const OPENAI_PATHS = new Set(['/v1/images/generations', '/v1/images/edits']);
/**
 * Azure OpenAI's v1 endpoint (https://<resource>.openai.azure.com/openai/v1/, no api-version): the
 * OpenAI images API, `model` the deployment's name, the key in the `api-key` header. Without it,
 * 401 with Azure's body (the Azure OpenAI REST reference).
 */
const AZURE_OPENAI_PATHS = new Set(['/openai/v1/images/generations', '/openai/v1/images/edits']);
const AZURE_ACCESS_DENIED: JsonReply = {
  status: 401,
  json: {
    error: {
      code: '401',
      message:
        'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
    },
  },
};

/**
 * The refusal the provider would answer `request` with (routed by path, like the real APIs), or
 * null. A body the rules cannot read is left to the fake's own handling.
 */
export async function providerRefusal(request: {
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}): Promise<JsonReply | null> {
  const path = request.url.split('?')[0];
  try {
    const vertex = VERTEX_PATH.exec(path);
    if (vertex && !/^Bearer \S+$/.test(String(request.headers.authorization ?? ''))) {
      return geminiReply.error(
        401,
        'UNAUTHENTICATED',
        'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
      );
    }
    const gemini = GEMINI_PATH.exec(path) ?? vertex;
    if (gemini) {
      // The Gemini API's request limit for inline data (https://ai.google.dev/gemini-api/docs/image-understanding).
      if (request.body.length > GEMINI_MAX_REQUEST_BYTES) {
        return invalidArgument(`Request payload size exceeds the limit: ${GEMINI_MAX_REQUEST_BYTES} bytes.`);
      }
      const body = JSON.parse(request.body.toString('utf8')) as {
        contents?: { parts?: { inlineData?: { data?: string } }[] }[];
        generationConfig?: { imageConfig?: unknown; seed?: unknown };
      };
      const parts = (body.contents ?? []).flatMap((content) => content.parts ?? []);
      const tooLarge = parts.findIndex(
        (part) => Buffer.byteLength(part.inlineData?.data ?? '', 'base64') > GEMINI_MAX_INLINE_IMAGE_BYTES,
      );
      if (tooLarge >= 0) {
        return invalidArgument(`Inline data of part ${tooLarge} exceeds ${GEMINI_MAX_INLINE_IMAGE_BYTES} bytes.`);
      }
      const seed = body.generationConfig?.seed;
      // GenerationConfig.seed is an int32: another value is refused.
      if (
        seed !== undefined &&
        !(Number.isInteger(seed) && (seed as number) >= -(2 ** 31) && (seed as number) < 2 ** 31)
      )
        return invalidArgument(`Invalid value at 'generation_config.seed' (TYPE_INT32), ${JSON.stringify(seed)}`);
      return geminiImageConfigRefusal(gemini[1], body.generationConfig?.imageConfig);
    }
    const azure = AZURE_OPENAI_PATHS.has(path);
    if (azure && !request.headers['api-key']) return AZURE_ACCESS_DENIED;
    if (OPENAI_PATHS.has(path) || azure) {
      let fields: {
        model?: unknown;
        size?: unknown;
        response_format?: unknown;
        stream?: unknown;
        quality?: unknown;
        seed?: unknown;
      };
      if (String(request.headers['content-type']).startsWith('multipart/form-data')) {
        const form = await new Response(new Uint8Array(request.body), {
          headers: { 'content-type': String(request.headers['content-type']) },
        }).formData();
        fields = {
          model: form.get('model'),
          size: form.get('size') ?? undefined,
          response_format: form.get('response_format') ?? undefined,
          stream: form.get('stream') ?? undefined,
          quality: form.get('quality') ?? undefined,
          seed: form.get('seed') ?? undefined,
        };
      } else {
        fields = JSON.parse(request.body.toString('utf8')) as typeof fields;
      }
      const model = String(fields.model ?? '');
      // The images API takes no seed, whatever the model.
      if (fields.seed !== undefined) return unknownParameter('seed');
      return (
        openAiResponseFormatRefusal(model, fields.response_format) ??
        openAiStreamRefusal(model, fields.stream) ??
        openAiQualityRefusal(model, fields.quality) ??
        openAiSizeRefusal(model, fields.size)
      );
    }
  } catch {
    return null;
  }
  return null;
}
