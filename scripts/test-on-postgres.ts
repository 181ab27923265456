/**
 * The second pass of `npm test` on its own (`npm run test:postgres`): the HTTP, MCP, worker, service
 * and webhook suites again with their store on PostgreSQL (TEST_STORE=postgres), so that "same
 * tests, different adapters" holds for every test and not only for those written over both stores
 * (less the files that say why they are left out: scripts/tap-passes.ts).
 * Where no PostgreSQL answers (a laptop without one), the pass is skipped with a line that says so;
 * .ci/run starts one. It ends with the time of its slowest files, then with a line saying the
 * browser tests were skipped, when they were (no Chromium).
 */
import { finish, postgresPass } from './tap-passes.js';

finish([await postgresPass()]);
