import { PIXEL_SIZES, type AspectRatio } from '../../schemas/pixel-sizes.js';

/**
 * What to ask a model provider for, so that it accepts the call (decision 0011). Pure: the adapters
 * send the planned request, then `toExactSizeResult` scales and centre-crops the reply to the
 * catalog's exact size, and the task records `resized_from` when it had to.
 */

export interface Size {
  width: number;
  height: number;
}

/**
 * The `size` values an OpenAI-images-API model accepts:
 * - `exact`: any WIDTHxHEIGHT (compatible providers that take any size): the catalog's is sent;
 * - `sizes`: a fixed list;
 * - `flexible`: any WIDTHxHEIGHT within limits (gpt-image-2).
 */
export type OpenAiSizeRule =
  | { kind: 'exact' }
  | { kind: 'sizes'; sizes: readonly Size[] }
  | { kind: 'flexible'; multipleOf: number; maxEdge: number; minPixels: number; maxPixels: number; maxRatio: number };

const size = (width: number, height: number): Size => ({ width, height });

/** The standard sizes every GPT image model takes. */
const GPT_IMAGE_SIZES: OpenAiSizeRule = {
  kind: 'sizes',
  sizes: [size(1024, 1024), size(1536, 1024), size(1024, 1536)],
};

/**
 * Built-in knowledge, by model name prefix (first match wins), from the images API reference as
 * the official `openai` SDK (6.x) documents `size`:
 * - gpt-image-2 (and its dated snapshots): any WIDTHxHEIGHT with both edges multiples of 16, the
 *   long edge at most 3 times the short one, at most 3840 px per edge and 3840×2160 px in all,
 *   at least 655 360 px;
 * - other GPT image models (gpt-image-1, -1-mini, -1.5, chatgpt-image-*): 1024², 1536×1024, 1024×1536;
 * - dall-e-3: 1024², 1792×1024, 1024×1792; dall-e-2: 256², 512², 1024².
 * Any other name is a compatible provider's model: `exact` (OPENAI_IMAGE_SIZES overrides).
 */
const OPENAI_MODEL_RULES: readonly [prefix: string, rule: OpenAiSizeRule][] = [
  [
    'gpt-image-2',
    { kind: 'flexible', multipleOf: 16, maxEdge: 3840, minPixels: 655_360, maxPixels: 3840 * 2160, maxRatio: 3 },
  ],
  ['gpt-image-', GPT_IMAGE_SIZES],
  ['chatgpt-image-', GPT_IMAGE_SIZES],
  ['dall-e-3', { kind: 'sizes', sizes: [size(1024, 1024), size(1792, 1024), size(1024, 1792)] }],
  ['dall-e-2', { kind: 'sizes', sizes: [size(256, 256), size(512, 512), size(1024, 1024)] }],
];

const SIZE_LIST = /^\s*[1-9][0-9]{0,4}x[1-9][0-9]{0,4}(\s*,\s*[1-9][0-9]{0,4}x[1-9][0-9]{0,4})*\s*$/;

/**
 * The OpenAI images API model families, which take different parameters: the GPT image models
 * always answer in base64 and refuse `response_format`; the DALL·E models and compatible providers
 * take it (and default to URLs). Only the GPT image models take `stream`.
 */
export type OpenAiModelFamily = 'gpt-image' | 'dall-e' | 'other';

/**
 * The model's name without a router's provider prefix (`openai/gpt-image-1` → `gpt-image-1`), as
 * the family and size rules read it.
 */
function modelBaseName(model: string): string {
  return model.slice(model.lastIndexOf('/') + 1);
}

/**
 * OPENAI_MODEL_FAMILY when set (an Azure deployment's name says nothing), else by the model's name,
 * a router's `provider/` prefix aside.
 */
export function openAiModelFamily(model: string, configured?: OpenAiModelFamily): OpenAiModelFamily {
  if (configured !== undefined) return configured;
  const name = modelBaseName(model);
  if (/^(gpt-image|chatgpt-image)-/.test(name)) return 'gpt-image';
  if (name.startsWith('dall-e-')) return 'dall-e';
  return 'other';
}

/**
 * The `quality` values a model takes (the images API reference, as the `openai` SDK documents it):
 * the GPT image models low, medium, high and auto; dall-e-3 standard and hd; dall-e-2 standard
 * only. A compatible provider's model is sent none (it may refuse a parameter it does not know).
 * A DALL·E deployment whose name says nothing is taken as dall-e-3, the one Azure serves.
 */
export function openAiQualities(model: string, family: OpenAiModelFamily): readonly string[] {
  switch (family) {
    case 'gpt-image':
      return ['low', 'medium', 'high', 'auto'];
    case 'dall-e':
      return modelBaseName(model).startsWith('dall-e-2') ? ['standard'] : ['standard', 'hd'];
    case 'other':
      return [];
  }
}

/**
 * The rule for `model`: OPENAI_IMAGE_SIZES when set, else what the model's name says; a name that
 * says nothing of a model configured as a GPT image model gets the sizes every one of them takes.
 */
export function openAiSizeRule(model: string, configured?: string, family?: OpenAiModelFamily): OpenAiSizeRule {
  if (configured !== undefined) return parseOpenAiImageSizes(configured);
  const name = modelBaseName(model);
  const known = OPENAI_MODEL_RULES.find(([prefix]) => name.startsWith(prefix))?.[1];
  return known ?? (family === 'gpt-image' ? GPT_IMAGE_SIZES : { kind: 'exact' });
}

/** OPENAI_IMAGE_SIZES: `exact`, or comma-separated WIDTHxHEIGHT; throws on anything else. */
export function parseOpenAiImageSizes(value: string): OpenAiSizeRule {
  if (value.trim() === 'exact') return { kind: 'exact' };
  if (!SIZE_LIST.test(value)) {
    throw new Error('expected exact or comma-separated WIDTHxHEIGHT sizes, e.g. 1024x1024,1536x1024,1024x1536');
  }
  const sizes = value.split(',').map((entry) => {
    const [width, height] = entry.trim().split('x').map(Number);
    return size(width, height);
  });
  return { kind: 'sizes', sizes };
}

/** The size to ask for, for a catalog size of `target`. */
export function plannedSize(target: Size, rule: OpenAiSizeRule): Size {
  switch (rule.kind) {
    case 'exact':
      return target;
    case 'sizes':
      return nearestAcceptedSize(target, rule.sizes);
    case 'flexible':
      return flexibleSize(target, rule);
  }
}

/**
 * Among `accepted`, those nearest to the target in aspect ratio (compared as log ratios, so 2:1
 * and 1:2 are as far from 1:1); of them, the largest with no more pixels than the target, else
 * the largest. (In pixels, not per edge: 1264×848 asks dall-e-2 for 1024×1024, not 512×512.)
 */
export function nearestAcceptedSize(target: Size, accepted: readonly Size[]): Size {
  if (accepted.length === 0) throw new Error('no accepted sizes');
  const distance = (s: Size) => Math.abs(Math.log(s.width / s.height) - Math.log(target.width / target.height));
  const nearest = Math.min(...accepted.map(distance));
  const sameRatio = accepted.filter((s) => distance(s) - nearest < 1e-9);
  const area = (s: Size) => s.width * s.height;
  const largest = (sizes: Size[]) => sizes.reduce((best, s) => (area(s) > area(best) ? s : best));
  const within = sameRatio.filter((s) => area(s) <= area(target));
  return largest(within.length > 0 ? within : sameRatio);
}

/**
 * The target itself when the model takes it; else the target's aspect ratio scaled into the
 * limits, edges rounded down to the multiple (up, when below the pixel minimum).
 */
function flexibleSize(target: Size, rule: Extract<OpenAiSizeRule, { kind: 'flexible' }>): Size {
  const { multipleOf: m } = rule;
  // The long edge at most maxRatio times the short one: shorten the long edge (the crop takes the rest).
  let { width, height } = target;
  if (width > height * rule.maxRatio) width = height * rule.maxRatio;
  if (height > width * rule.maxRatio) height = width * rule.maxRatio;
  const pixels = width * height;
  const down = Math.min(1, rule.maxEdge / Math.max(width, height), Math.sqrt(rule.maxPixels / pixels));
  if (down < 1 || width % m !== 0 || height % m !== 0 || pixels < rule.minPixels) {
    const up = Math.max(down, Math.sqrt(rule.minPixels / pixels));
    const round = up > 1 ? Math.ceil : Math.floor;
    width = Math.max(m, round((width * up) / m) * m);
    height = Math.max(m, round((height * up) / m) * m);
  }
  return size(width, height);
}

/** Gemini's imageConfig.imageSize values (Gemini 3 Pro Image's contract, which the catalog shares). */
export type GeminiImageSize = '1K' | '2K' | '4K';

/**
 * Gemini image model families, by name prefix: Gemini 3 Pro Image and Gemini 3.1 Flash Image take
 * imageConfig.imageSize (1K, 2K, 4K) and aspectRatio; Gemini 3.1 Flash-Lite Image is 1K only; the
 * Gemini 2.x image models (gemini-2.5-flash-image, …) take aspectRatio only and answer ~1K. A name
 * not listed is asked with aspectRatio only: the model's default size, resized, rather than a
 * parameter it may refuse.
 */
const GEMINI_IMAGE_SIZE_FAMILIES: readonly [prefix: string, sizes: readonly GeminiImageSize[]][] = [
  ['gemini-3-pro-image', ['1K', '2K', '4K']],
  ['gemini-3.1-flash-image', ['1K', '2K', '4K']],
];

/** The imageConfig for a catalog aspect ratio and resolution on `model`. */
export function geminiImageConfig(
  model: string,
  aspectRatio: string,
  resolution: string,
): { aspectRatio: string; imageSize?: GeminiImageSize } {
  const sizes = GEMINI_IMAGE_SIZE_FAMILIES.find(([prefix]) => model.startsWith(prefix))?.[1] ?? [];
  const imageSize = sizes.find((s) => s === resolution);
  return imageSize ? { aspectRatio, imageSize } : { aspectRatio };
}

/**
 * What Gemini 2.5 Flash Image makes for each aspect ratio (it takes no imageSize; one size per
 * ratio), as Google's image-generation guide (ai.google.dev/gemini-api/docs/image-generation,
 * "Aspect ratios") tables it. Not the catalog's 1K row, which is Gemini 3 Pro Image's: at 16:9
 * this model makes 1344×768, not 1376×768, so a 2K there needs more than twice its size.
 */
const GEMINI_25_FLASH_IMAGE_SIZES: Readonly<Record<AspectRatio, readonly [number, number]>> = {
  '1:1': [1024, 1024],
  '2:3': [832, 1248],
  '3:2': [1248, 832],
  '3:4': [864, 1184],
  '4:3': [1184, 864],
  '4:5': [896, 1152],
  '5:4': [1152, 896],
  '9:16': [768, 1344],
  '16:9': [1344, 768],
  '21:9': [1536, 672],
};

/**
 * The one size per ratio a Gemini model without imageSize makes: the Gemini 2.x image models
 * (gemini-2.5-flash-image, its previews, gemini-2.0-flash image generation) by their documented
 * table; a model this plan does not know, the catalog's 1K row (Gemini's 1K table, the nearest
 * guess). null for a ratio the table does not hold.
 */
function geminiDefaultSize(model: string, aspectRatio: string): Size | null {
  const table: Readonly<Record<string, readonly [number, number]>> = model.startsWith('gemini-2')
    ? GEMINI_25_FLASH_IMAGE_SIZES
    : Object.fromEntries(Object.entries(PIXEL_SIZES).map(([ratio, sizes]) => [ratio, sizes['1K']]));
  const found = table[aspectRatio];
  return found ? size(found[0], found[1]) : null;
}

/** What a configured backend makes of a catalog cell, as far as the plan knows it. */
export type BackendSizePlan =
  | { backend: 'local' }
  | { backend: 'gemini'; model: string }
  | { backend: 'openai'; rule: OpenAiSizeRule };

/**
 * The size the backend generates natively for a catalog cell: the local renderer and a Gemini
 * model that takes imageSize make the cell itself; another Gemini model makes its one size of the
 * ratio (geminiDefaultSize); an OpenAI-images model, the planned size
 * (the cell itself for `exact`).
 */
export function nativeSize(
  plan: BackendSizePlan,
  cell: { aspectRatio: string; resolution: string; width: number; height: number },
): Size {
  const target = size(cell.width, cell.height);
  switch (plan.backend) {
    case 'local':
      return target;
    case 'gemini': {
      if (geminiImageConfig(plan.model, cell.aspectRatio, cell.resolution).imageSize) return target;
      return geminiDefaultSize(plan.model, cell.aspectRatio) ?? target;
    }
    case 'openai':
      return plannedSize(target, plan.rule);
  }
}

/**
 * The linear factor by which an image of `from` is enlarged to cover `to` (scale to cover, then
 * centre-crop, as toExactSizeResult does); at most 1 means no enlargement.
 */
export function upscaleFactor(from: Size, to: Size): number {
  return Math.max(to.width / from.width, to.height / from.height);
}

/**
 * What a model's configured backend makes of a catalog cell: the size it generates, the factor by
 * which that is scaled to the cell, and whether MAX_UPSCALE allows it.
 */
export type ResolutionCheck = (
  model: string,
  cell: { aspectRatio: string; resolution: string; width: number; height: number },
) => { native: Size; factor: number; allowed: boolean };
