import t from 'tap';
import { SEED_MAX } from '../../schemas/model-entry.js';
import { seedAt } from '../../src/core/seed.js';

t.test('the i-th image of several is seed + i, wrapping within 0..SEED_MAX', async (t) => {
  t.equal(seedAt(7, 0), 7);
  t.equal(seedAt(7, 3), 10);
  t.equal(seedAt(SEED_MAX, 0), SEED_MAX);
  t.equal(seedAt(SEED_MAX, 1), 0);
  t.equal(seedAt(SEED_MAX - 1, 9), 7);
});
