import t from 'tap';
import { testStoreAdapter } from '../helpers/store.js';
import { CONTRACT_JOBS, storeContract } from './store-contract.js';

t.jobs = CONTRACT_JOBS;
storeContract(t, testStoreAdapter('sqlite'));
