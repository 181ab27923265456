import t from 'tap';
import { needsStore } from '../helpers/store.js';
import { reusedPostgresSchemas } from '../helpers/reused-postgres-schemas.js';
import { CONTRACT_JOBS, storeContract } from './store-contract.js';

// Each test of the contract on an empty schema of its own, emptied rather than migrated anew.
t.test('postgres', { ...(await needsStore('postgres')), jobs: CONTRACT_JOBS }, async (t) =>
  storeContract(t, reusedPostgresSchemas(t)),
);
