/**
 * `npm test` after lint and typecheck: tap over every test file, then (when that passed) the
 * PostgreSQL pass; it ends with the time of each pass's slowest files, and then with a line saying
 * the browser tests were skipped, when they were (no Chromium).
 */
import { finish, postgresPass, tapPass } from './tap-passes.js';

const passes = [tapPass('SQLite pass (every test file)', [], process.env)];
if (passes[0].status === 0) passes.push(await postgresPass());
finish(passes);
