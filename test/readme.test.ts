import { readFileSync } from 'node:fs';
import t from 'tap';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const ci = readFileSync(new URL('../.ci/run', import.meta.url), 'utf8');

t.test('CI runs exactly the README test command, on Node.js 24 and then 26', async (t) => {
  const command = 'scripts/with-node.sh 24 npm ci && scripts/with-node.sh 24 npm test';
  t.ok(readme.includes(`\`\`\`sh\n${command}\n\`\`\``), 'the README shows it');
  t.ok(ci.includes(`readme_test_command='${command}'`), '.ci/run runs it');
  t.ok(ci.includes('for line in 24 26'), 'both LTS lines, 24 first');
  t.ok(
    readme.includes('```sh\nscripts/with-node.sh 24 npm ci && scripts/with-node.sh 24 npm start\n```'),
    'and starts with it',
  );
});
