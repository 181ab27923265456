import t from 'tap';
import { testStoreAdapter } from '../helpers/store.js';
import { storeContract } from './store-contract.js';

storeContract(t, testStoreAdapter('sqlite'));
