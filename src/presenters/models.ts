import type { ModelId } from '../../schemas/catalog.js';
import { OUTPUT_FORMATS } from '../../schemas/output-format.js';
import type { ModelCatalogEntry } from '../../schemas/model-entry.js';
import type { ResolutionCheck } from '../core/size-plan.js';

/** Per aspect ratio and resolution: the size generated, and whether it is delivered as is, resized, or not at all. */
function nativeSizes(model: ModelCatalogEntry, check: ResolutionCheck) {
  return Object.fromEntries(
    Object.entries(model.pixelSizes).map(([aspectRatio, byResolution]) => [
      aspectRatio,
      Object.fromEntries(
        Object.entries(byResolution).map(([resolution, { width, height }]) => {
          const { native, factor, allowed } = check(model.id, { aspectRatio, resolution, width, height });
          const asGenerated = native.width === width && native.height === height;
          const result = !allowed ? 'unavailable' : asGenerated ? 'native' : 'resized';
          return [resolution, { ...native, result, scale: Math.round(factor * 1000) / 1000 }] as const;
        }),
      ),
    ]),
  );
}

/** A catalog entry as the Model resource: what GET /api/v1/models and the MCP tool list_models answer. */
export function toModelResource(model: ModelCatalogEntry, check: ResolutionCheck) {
  return {
    // The catalog's entries are exactly the models MODEL_IDS lists.
    id: model.id as ModelId,
    description: model.description,
    prompt_length: model.promptLength,
    image_reference_count: model.imageReferenceCount,
    aspect_ratios: [...model.aspectRatios],
    resolutions: [...model.resolutions],
    output_formats: [...OUTPUT_FORMATS],
    defaults: { aspect_ratio: model.defaults.aspectRatio, resolution: model.defaults.resolution },
    prices: { ...model.prices },
    pixel_sizes: model.pixelSizes,
    native_sizes: nativeSizes(model, check),
  };
}

export type ModelResourceOf = ReturnType<typeof toModelResource>;
