import { readFileSync } from 'node:fs';
import t from 'tap';
import { ALL_ASPECT_RATIOS } from '../schemas/catalog.js';
import { PIXEL_SIZES } from '../schemas/pixel-sizes.js';
import { ConfigSchema } from '../src/config.js';
import { openAiSizeRule, plannedSize } from '../src/core/size-plan.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const ci = readFileSync(new URL('../.ci/run', import.meta.url), 'utf8');

t.test('the README documents every configuration variable', async (t) => {
  for (const name of Object.keys(ConfigSchema.properties)) {
    t.ok(readme.includes(`\`${name}\``), `${name} is in the README`);
  }
});

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

t.test('the README table of sizes asked of each OpenAI model is the size plan', async (t) => {
  const models = ['gpt-image-2', 'gpt-image-1', 'dall-e-3', 'dall-e-2'];
  const format = (size: { width: number; height: number }) => `${size.width}×${size.height}`;
  for (const ratio of ALL_ASPECT_RATIOS) {
    const sizes = Object.values(PIXEL_SIZES[ratio]).map(([width, height]) => ({ width, height }));
    const asked = models.map((model) => {
      const planned = sizes.map((size) => format(plannedSize(size, openAiSizeRule(model))));
      return new Set(planned).size === 1 ? planned[0] : planned.join(' / ');
    });
    const row = `| ${ratio} | ${sizes.map(format).join(' / ')} | ${asked.join(' | ')} |`;
    t.ok(readme.includes(`\n${row}\n`), row);
  }
});
