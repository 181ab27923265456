import { findModel } from '../../schemas/catalog.js';
import type { ModelCatalogEntry } from '../../schemas/model-entry.js';
import {
  DEFAULT_OUTPUT_COMPRESSION,
  DEFAULT_OUTPUT_FORMAT,
  OUTPUT_COMPRESSION_NOT_APPLICABLE,
  type OutputFormat,
} from '../../schemas/output-format.js';
import { DomainError } from './errors.js';

export interface RequestedParameters {
  aspect_ratio?: string;
  resolution?: string;
  output_format?: OutputFormat;
  output_compression?: number;
  seed?: number;
}

export interface EffectiveParameters {
  aspect_ratio: string;
  resolution: string;
  output_format: OutputFormat;
  /** The encoder's quality for jpeg and webp; null for png, which is lossless. */
  output_compression: number | null;
  /** The generation's seed (0 to SEED_MAX): asked for, or drawn at create; null in an estimate without one, and on tasks older than seeds. */
  seed: number | null;
}

export interface PricedRequest {
  model: ModelCatalogEntry;
  parameters: EffectiveParameters;
  cost: number;
  width: number;
  height: number;
}

export function modelOf(modelId: string): ModelCatalogEntry {
  const model = findModel(modelId);
  // Requests reach the core only after schema validation, so an unknown model is a programming error.
  if (!model) throw new Error(`Unknown model ${modelId}`);
  return model;
}

/**
 * The parameters a task runs with. Refuses (invalid_request) an output_compression without a
 * lossy output_format, the one rule between two fields the schema leaves to the core.
 */
export function applyDefaults(
  model: ModelCatalogEntry,
  parameters: RequestedParameters | undefined,
): EffectiveParameters {
  const outputFormat = parameters?.output_format ?? DEFAULT_OUTPUT_FORMAT;
  if (outputFormat === 'png' && parameters?.output_compression !== undefined) {
    const pointer = '/parameters/output_compression';
    throw new DomainError('invalid_request', `body ${pointer}: ${OUTPUT_COMPRESSION_NOT_APPLICABLE}`, [
      { pointer, location: 'body', code: 'not_allowed', detail: OUTPUT_COMPRESSION_NOT_APPLICABLE },
    ]);
  }
  return {
    aspect_ratio: parameters?.aspect_ratio ?? model.defaults.aspectRatio,
    resolution: parameters?.resolution ?? model.defaults.resolution,
    output_format: outputFormat,
    output_compression: outputFormat === 'png' ? null : (parameters?.output_compression ?? DEFAULT_OUTPUT_COMPRESSION),
    seed: parameters?.seed ?? null,
  };
}

/** Token price of one generation at the given resolution. */
export function priceOf(model: ModelCatalogEntry, resolution: string): number {
  const price = model.prices[resolution as keyof typeof model.prices];
  if (price === undefined) throw new Error(`${model.id} does not offer ${resolution}`);
  return price;
}

export function pixelSizeOf(
  model: ModelCatalogEntry,
  parameters: Pick<EffectiveParameters, 'aspect_ratio' | 'resolution'>,
): { width: number; height: number } {
  const size = model.pixelSizes[parameters.aspect_ratio]?.[parameters.resolution];
  if (!size) throw new Error(`${model.id} does not offer ${parameters.aspect_ratio} at ${parameters.resolution}`);
  return size;
}

export function priceRequest(modelId: string, requested: RequestedParameters | undefined): PricedRequest {
  const model = modelOf(modelId);
  const parameters = applyDefaults(model, requested);
  return { model, parameters, cost: priceOf(model, parameters.resolution), ...pixelSizeOf(model, parameters) };
}
