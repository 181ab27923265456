import { readFileSync } from 'node:fs';
import t from 'tap';
import { ConfigSchema } from '../src/config.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const ci = readFileSync(new URL('../.ci/run', import.meta.url), 'utf8');

t.test('the README documents every configuration variable', async (t) => {
  for (const name of Object.keys(ConfigSchema.properties)) {
    t.ok(readme.includes(`\`${name}\``), `${name} is in the README`);
  }
});

t.test('CI runs exactly the README test command', async (t) => {
  const command = 'npm ci && npm test';
  t.ok(readme.includes(`\`\`\`sh\n${command}\n\`\`\``), 'the README shows it');
  t.ok(ci.includes(`'${command}'`), '.ci/run runs it');
});
