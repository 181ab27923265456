/**
 * The seed values of docs/design.md §3.1 (per-model limits and prices) and §3.2 (pixel sizes), written out
 * on purpose: the catalog in schemas/ is what the tests check, so it must not be their oracle.
 */
export interface SeedModel {
  id: 'alpha-pro' | 'beta-v5-pro';
  prompt: { min: number; max: number };
  imageReference: { min: number; max: number };
  aspectRatios: string[];
  costs: Record<string, number>;
  /** Values that look plausible but are not offered by this model. */
  disallowedRatios: string[];
  disallowedResolutions: string[];
}

export const SEED: SeedModel[] = [
  {
    id: 'alpha-pro',
    prompt: { min: 3, max: 10000 },
    imageReference: { min: 1, max: 8 },
    aspectRatios: ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'],
    costs: { '1K': 25, '2K': 25, '4K': 50 },
    disallowedRatios: ['2:1', '1:2', '16:10', '1:1 ', '1x1', ''],
    disallowedResolutions: ['8K', '1k', '4k', '3K', '512', ''],
  },
  {
    id: 'beta-v5-pro',
    prompt: { min: 3, max: 5000 },
    imageReference: { min: 1, max: 10 },
    aspectRatios: ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'],
    costs: { '1K': 25, '2K': 50 },
    disallowedRatios: ['4:5', '5:4', '2:1', '16:10'],
    disallowedResolutions: ['4K', '8K', '1k', '2k', ''],
  },
];

/** docs/design.md §3.2: [width, height] per ratio and resolution. */
export const PIXELS: Record<string, Record<string, [number, number]>> = {
  '1:1': { '1K': [1024, 1024], '2K': [2048, 2048], '4K': [4096, 4096] },
  '2:3': { '1K': [848, 1264], '2K': [1696, 2528], '4K': [3392, 5056] },
  '3:2': { '1K': [1264, 848], '2K': [2528, 1696], '4K': [5056, 3392] },
  '3:4': { '1K': [896, 1200], '2K': [1792, 2400], '4K': [3584, 4800] },
  '4:3': { '1K': [1200, 896], '2K': [2400, 1792], '4K': [4800, 3584] },
  '4:5': { '1K': [928, 1152], '2K': [1856, 2304], '4K': [3712, 4608] },
  '5:4': { '1K': [1152, 928], '2K': [2304, 1856], '4K': [4608, 3712] },
  '9:16': { '1K': [768, 1376], '2K': [1536, 2752], '4K': [3072, 5504] },
  '16:9': { '1K': [1376, 768], '2K': [2752, 1536], '4K': [5504, 3072] },
  '21:9': { '1K': [1584, 672], '2K': [3168, 1344], '4K': [6336, 2688] },
};
