import { createHash } from 'node:crypto';
import sharp, { type OverlayOptions } from 'sharp';
import { encodeResult } from './result-encoding.js';
import { GenerationError, type GeneratedImage, type GenerationInput, type ImageGenerator } from './port.js';

const CAPTION_MAX_CODE_POINTS = 80;
// Uploads are capped by size, not by dimensions; a small, highly compressible file can still
// declare billions of pixels. 64 Mpx covers any real photo.
const REFERENCE_MAX_INPUT_PIXELS = 8192 * 8192;
const FONT_FAMILY = 'DejaVu Sans, sans-serif';

export interface Rect {
  left: number;
  top: number;
  size: number;
}

/**
 * A local preview renderer, not a generative model: it draws a deterministic picture (gradient,
 * shapes, the prompt as a caption, and every reference image as a tile) so the whole service can
 * run and be tested without a model provider. The same input gives byte-identical output on the
 * same machine (text rendering depends on the installed fonts), in the task's output format.
 */
export class LocalRenderer implements ImageGenerator {
  readonly name = 'local-renderer';

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    signal.throwIfAborted();
    const { width, height } = input;
    const tileRects = referenceTileRects(width, height, input.references.length);
    const tiles = await abortable(
      Promise.all(input.references.map((reference, i) => decodeTile(reference, i, tileRects[i]))),
      signal,
    );
    signal.throwIfAborted();
    const scene = Buffer.from(sceneSvg(input, tileRects));
    const { bytes, contentType } = await abortable(
      encodeResult(sharp(scene).composite(tiles).removeAlpha(), input),
      signal,
    );
    return [{ bytes, contentType, width, height }];
  }
}

/** Where each reference tile lands: one strip along the bottom, centred, shrinking to fit. */
export function referenceTileRects(width: number, height: number, count: number): Rect[] {
  if (count === 0) return [];
  const unit = Math.min(width, height);
  const gap = Math.round(unit * 0.03);
  const footer = Math.round(unit * 0.06);
  const widthPerTile = (width - gap * (count + 1)) / count;
  const size = Math.max(1, Math.floor(Math.min(height * 0.28, widthPerTile)));
  const stripWidth = count * size + (count - 1) * gap;
  const firstLeft = Math.max(0, Math.floor((width - stripWidth) / 2));
  const top = Math.max(0, height - footer - size);
  return Array.from({ length: count }, (_, i) => ({ left: firstLeft + i * (size + gap), top, size }));
}

async function decodeTile(reference: Buffer, index: number, rect: Rect): Promise<OverlayOptions> {
  try {
    const { data, info } = await sharp(reference, { limitInputPixels: REFERENCE_MAX_INPUT_PIXELS })
      .rotate()
      .resize(rect.size, rect.size, { fit: 'cover' })
      .flatten({ background: '#ffffff' })
      .raw()
      .toBuffer({ resolveWithObject: true });
    const raw = { width: info.width, height: info.height, channels: info.channels };
    return { input: data, raw, left: rect.left, top: rect.top };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const message = `reference ${index + 1} could not be decoded: ${reason}`;
    throw new GenerationError('reference_unreadable', message, false);
  }
}

function sceneSvg(input: GenerationInput, tileRects: Rect[]): string {
  const { width, height } = input;
  const unit = Math.min(width, height);
  const random = seededRandom(sceneSeed(input));
  const colour = () => {
    const hue = Math.floor(random() * 360);
    return `hsl(${hue}, ${55 + Math.floor(random() * 25)}%, ${40 + Math.floor(random() * 20)}%)`;
  };

  const gradientStart = colour();
  const gradientEnd = colour();
  const shapes = Array.from({ length: 5 }, () => {
    const cx = random() * width;
    const cy = random() * height;
    const size = unit * (0.12 + random() * 0.3);
    const paint = `fill="${colour()}" fill-opacity="0.55"`;
    return random() < 0.5
      ? `<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="${(size / 2).toFixed(1)}" ${paint}/>`
      : square(cx - size / 2, cy - size / 2, size, `rx="${(size * 0.12).toFixed(1)}" ${paint}`);
  });

  // Drawn under each tile, slightly larger, so tiles read as framed pictures.
  const frame = Math.max(2, Math.round(unit * 0.006));
  const tileFrames = tileRects.map((r) => square(r.left - frame, r.top - frame, r.size + 2 * frame, 'fill="#ffffff"'));

  const margin = Math.round(unit * 0.04);
  const band = Math.round(unit * 0.11);
  const caption = fitCaption(input.prompt, width - 2 * margin, band * 0.45, Math.max(10, unit * 0.022));
  const footerSize = Math.max(9, Math.round(unit * 0.022));
  const footer = `${input.model} · ${input.aspectRatio} · ${input.resolution} · local preview`;
  const font = `font-family="${FONT_FAMILY}" fill="#ffffff"`;

  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
<defs><linearGradient id="bg" x1="0" y1="0" x2="1" y2="1">
<stop offset="0" stop-color="${gradientStart}"/><stop offset="1" stop-color="${gradientEnd}"/>
</linearGradient></defs>
<rect width="${width}" height="${height}" fill="url(#bg)"/>
${shapes.join('\n')}
${tileFrames.join('\n')}
<rect width="${width}" height="${band}" fill="#000000" fill-opacity="0.45"/>
<text x="${width / 2}" y="${band / 2}" dominant-baseline="central" text-anchor="middle" ${font}
 font-size="${caption.fontSize.toFixed(1)}">${escapeXml(caption.text)}</text>
<text x="${width - margin}" y="${height - Math.round(footerSize * 0.8)}" text-anchor="end" ${font}
 font-size="${footerSize}" fill-opacity="0.85">${escapeXml(footer)}</text>
</svg>`;
}

function square(left: number, top: number, size: number, attributes: string): string {
  const [x, y, side] = [left, top, size].map((n) => n.toFixed(1));
  return `<rect x="${x}" y="${y}" width="${side}" height="${side}" ${attributes}/>`;
}

function sceneSeed(input: GenerationInput): Buffer {
  const referenceHashes = input.references.map((r) => createHash('sha256').update(r).digest('hex'));
  // JSON keeps field boundaries unambiguous ('ab'+'c' vs 'a'+'bc').
  // Also the seed, so that another seed draws another scene (a task older than seeds draws as before).
  const fields: unknown[] = [input.model, input.prompt, input.aspectRatio, input.resolution, referenceHashes];
  if (input.seed !== undefined) fields.push(input.seed);
  return createHash('sha256').update(JSON.stringify(fields)).digest();
}

/** Uniform numbers in [0, 1) drawn from a sha256 chain, so the scene depends only on the seed. */
function seededRandom(seed: Buffer): () => number {
  let block = seed;
  let offset = 0;
  return () => {
    if (offset + 4 > block.length) {
      block = createHash('sha256').update(block).digest();
      offset = 0;
    }
    const value = block.readUInt32BE(offset);
    offset += 4;
    return value / 2 ** 32;
  };
}

/**
 * Shrinks the font towards `minFontSize` before cutting text. Glyph widths are estimated, not
 * measured: measuring would need a second render pass.
 */
function fitCaption(prompt: string, maxWidth: number, maxFontSize: number, minFontSize: number) {
  const codePoints = Array.from(
    // XML 1.0 forbids control characters and lone surrogates; librsvg rejects the whole SVG.
    prompt
      // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it removes
      .replace(/[\u0000-\u001F\u007F-\u009F\uFFFE\uFFFF]|\p{Cs}/gu, ' ')
      .replace(/\s+/g, ' ')
      .trim(),
  );
  const emWidth = (cp: string) => ((cp.codePointAt(0) ?? 0) >= 0x2e80 ? 1 : 0.56);
  let kept = codePoints.slice(0, CAPTION_MAX_CODE_POINTS);
  let truncated = kept.length < codePoints.length;
  const ems = () => kept.reduce((sum, cp) => sum + emWidth(cp), truncated ? 1 : 0);
  while (kept.length > 0 && ems() * minFontSize > maxWidth) {
    kept = kept.slice(0, -1);
    truncated = true;
  }
  const text = kept.join('') + (truncated ? '…' : '');
  const fontSize = Math.max(minFontSize, Math.min(maxFontSize, maxWidth / Math.max(1, ems())));
  return { text, fontSize };
}

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.codePointAt(0)};`);
}

/** Lets the caller stop waiting at once; libvips cannot be interrupted, so the work finishes unobserved. */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
