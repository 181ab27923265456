import { defineModelModule } from '../model-entry.js';

export const alphaPro = defineModelModule({
  id: 'alpha-pro',
  description: 'High-fidelity model with the widest range of aspect ratios and up to 4K output.',
  promptLength: { min: 3, max: 10000 },
  imageReferenceCount: { min: 1, max: 8 },
  aspectRatios: ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'],
  prices: { '1K': 25, '2K': 25, '4K': 50 },
  defaults: { aspectRatio: '1:1', resolution: '1K' },
});
