import t from 'tap';
import { postgresPassFiles } from '../../scripts/tap-passes.js';

/**
 * The PostgreSQL pass of `npm test` runs the test files of its suites but those that leave it with
 * a line saying why (scripts/tap-passes.ts). Here on a made-up project.
 */
t.test(
  'a file leaves the pass with its marker line and reason; every other test file of the suites is run',
  async (t) => {
    const root = t.testdir({
      test: {
        http: {
          'tasks.test.ts': "import t from 'tap';\n",
          'parser.test.ts': "// Not in the PostgreSQL pass: the parser alone, no store.\nimport t from 'tap';\n",
          'mentions.test.ts': "import t from 'tap';\n/* Not in the PostgreSQL pass: only at the start of a line */\n",
          'helper.ts': '// Not in the PostgreSQL pass: not a test file anyway\n',
          nested: { 'deep.test.ts': "import t from 'tap';\n" },
        },
        worker: { 'loop.test.ts': "import t from 'tap';\n// Not in the PostgreSQL pass: fake tasks.\n" },
        core: { 'pricing.test.ts': "import t from 'tap';\n" },
      },
    });
    t.same(postgresPassFiles(root, ['test/http', 'test/worker']), {
      files: ['test/http/mentions.test.ts', 'test/http/nested/deep.test.ts', 'test/http/tasks.test.ts'],
      leftOut: [
        { file: 'test/http/parser.test.ts', reason: 'the parser alone, no store.' },
        { file: 'test/worker/loop.test.ts', reason: 'fake tasks.' },
      ],
    });
  },
);

t.test('a marker without a reason does not leave the pass', async (t) => {
  const root = t.testdir({ test: { http: { 'a.test.ts': '// Not in the PostgreSQL pass: \n' } } });
  t.same(postgresPassFiles(root, ['test/http']), { files: ['test/http/a.test.ts'], leftOut: [] });
});
