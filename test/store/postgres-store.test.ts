import t from 'tap';
import { needsStore, testStoreAdapter } from '../helpers/store.js';
import { storeContract } from './store-contract.js';

t.test('postgres', await needsStore('postgres'), async (t) => storeContract(t, testStoreAdapter('postgres')));
