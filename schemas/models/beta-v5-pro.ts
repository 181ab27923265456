import { defineModelModule } from '../model-entry.js';

export const betaV5Pro = defineModelModule({
  id: 'beta-v5-pro',
  description: 'Fast model for 1K and 2K output with up to 10 reference images.',
  promptLength: { min: 3, max: 5000 },
  imageReferenceCount: { min: 1, max: 10 },
  aspectRatios: ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'],
  prices: { '1K': 25, '2K': 50 },
  defaults: { aspectRatio: '1:1', resolution: '1K' },
});
