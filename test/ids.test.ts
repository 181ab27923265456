import t from 'tap';
import { newIdAt, uuidv7Floor } from '../src/ids.js';

const UUIDV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

t.test(
  'ids of one millisecond are UUIDv7s carrying it, distinct and increasing, past any buffer of random bits',
  async (t) => {
    const at = new Date('2030-01-01T00:00:00.000Z');
    // More ids than the generator draws random values at a time (1 024), so the source refills.
    const ids = Array.from({ length: 5000 }, () => newIdAt(at));
    t.ok(
      ids.every((id) => UUIDV7.test(id)),
      'every id is a UUIDv7',
    );
    t.ok(
      ids.every((id) => id.startsWith(uuidv7Floor(at).slice(0, 13))),
      'and carries the millisecond',
    );
    t.equal(new Set(ids).size, ids.length, 'no id twice');
    t.ok(
      ids.every((id, i) => i === 0 || id > ids[i - 1]),
      'each sorts after the one before',
    );
    const randomTails = new Set(ids.map((id) => id.slice(-8)));
    t.ok(randomTails.size > ids.length * 0.99, 'the random part differs from id to id');
  },
);

t.test('ids of a later millisecond sort after every id of an earlier one', async (t) => {
  const first = newIdAt(new Date('2030-01-01T00:00:01.000Z'));
  const second = newIdAt(new Date('2030-01-01T00:00:01.001Z'));
  t.ok(second > first);
  t.ok(second >= uuidv7Floor(new Date('2030-01-01T00:00:01.001Z')));
});
