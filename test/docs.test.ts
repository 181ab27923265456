import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { ALL_ASPECT_RATIOS } from '../schemas/catalog.js';
import { PIXEL_SIZES } from '../schemas/pixel-sizes.js';
import { renderConfigurationDoc } from '../scripts/configuration-doc.js';
import { ConfigSchema } from '../src/config.js';
import { openAiSizeRule, plannedSize } from '../src/core/size-plan.js';
import { PROBLEM_BY_CODE } from '../src/contract/problems.js';
import { canTransition, nextStatus, refundsOnEntry, type TaskEvent, type TaskStatus } from '../src/core/task.js';
import { TASK_STATUSES } from '../schemas/resources.js';

/**
 * The repository explains itself (docs/design.md §6): what the code cites must exist. Citations are
 * `docs/design.md §3.5` (a numbered heading of docs/design.md) and `decision 0016` (a note in
 * docs/decisions/); the design document and the tracker the code once cited are not in the
 * repository, so bare section numbers or tracker numbers lead a reader nowhere.
 */
const root = new URL('..', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), 'utf8');

function filesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter(
      (path) =>
        /\.(ts|mts|mjs|js|md|sh)$/.test(path) && !path.includes('node_modules') && !path.includes('generated-client'),
    );
}

const codeFiles = ['src', 'test', 'bench', 'scripts', 'schemas'].flatMap(filesUnder);
const docFiles = [...filesUnder('docs'), 'README.md', 'BENCHMARKS.md'];

const sections = new Set(
  [...read('docs/design.md').matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((match) => match[1]),
);
const notes = new Set(
  readdirSync(join(root, 'docs/decisions')).flatMap((name) => /^(\d{4})-.*\.md$/.exec(name)?.[1] ?? []),
);

/** Each match of `pattern` in the files, as "file:line: text" with the captured group. */
function citations(files: string[], pattern: RegExp): { where: string; cited: string }[] {
  return files.flatMap((file) =>
    read(file)
      .split('\n')
      .flatMap((line, index) =>
        [...line.matchAll(pattern)].map((match) => ({
          where: `${file}:${index + 1}: ${line.trim()}`,
          cited: match[1],
        })),
      ),
  );
}

t.test('docs/design.md numbers its sections 1–7, with 3.1–3.8 under the contract', async (t) => {
  for (const section of ['1', '2', '3', '4', '5', '6', '7', '3.1', '3.2', '3.3', '3.4', '3.5', '3.6', '3.7', '3.8'])
    t.ok(sections.has(section), `§${section} is a heading`);
});

t.test('every § citation in code and docs names a section heading of docs/design.md', async (t) => {
  const cited = citations([...codeFiles, ...docFiles], /§(\d+(?:\.\d+)*)/g);
  t.ok(cited.length > 50, `the code cites the design (${cited.length} citations found)`);
  const unknown = cited.filter((c) => !sections.has(c.cited)).map((c) => c.where);
  t.same(unknown, [], 'no citation of a section docs/design.md does not have');
});

t.test('every "decision NNNN" citation names a note in docs/decisions/', async (t) => {
  const cited = citations([...codeFiles, ...docFiles], /\b[Dd]ecisions? \[?(\d{4})\b/g);
  t.ok(cited.length > 20, `notes are cited (${cited.length} citations found)`);
  const unknown = cited.filter((c) => !notes.has(c.cited)).map((c) => c.where);
  t.same(unknown, [], 'no citation of a note that does not exist');
});

t.test('code cites the design and decisions, not a design document or tracker outside the repository', async (t) => {
  // Written with a character class so that this file does not match itself.
  const outside = citations(codeFiles, /(\bD[E]SIGN(?: section)? \d|\b[Ii]ssue #?\d+)/g).map((c) => c.where);
  t.same(outside, [], 'cite docs/design.md §x.y or a decision note instead');
});

t.test('docs/design.md §4.1 names every configuration variable', async (t) => {
  const design = read('docs/design.md');
  for (const name of Object.keys(ConfigSchema.properties)) t.ok(design.includes(`\`${name}\``), name);
});

t.test("docs/design.md §3.5's table of moves is the core's state machine", async (t) => {
  const rows = [...read('docs/design.md').matchAll(/^\| `([A-Z_]+)` \| (\w+) \| `([A-Z_]+)` \| (refund)? ?\|$/gm)];
  const written = rows.map(([, from, event, to, refund]) => `${from} ${event} → ${to}${refund ? ' refund' : ''}`);
  const events: TaskEvent[] = ['claim', 'complete', 'fail', 'cancel', 'release'];
  const allowed = (TASK_STATUSES as readonly TaskStatus[]).flatMap((from) =>
    events
      .filter((event) => canTransition(from, event))
      .map((event) => {
        const to = nextStatus(from, event);
        return `${from} ${event} → ${to}${refundsOnEntry(to) ? ' refund' : ''}`;
      }),
  );
  t.same(written.sort(), allowed.sort());
});

t.test('docs/design.md §3.7 gives every error code with its status', async (t) => {
  const design = read('docs/design.md');
  const table = design.slice(design.indexOf('### 3.7'), design.indexOf('### 3.8'));
  const rows = [...table.matchAll(/^\| (\d{3})(?: \/ \d{3})? \| (.+?) \|/gm)];
  const statusOf = new Map(
    rows.flatMap(([, status, codes]) => [...codes.matchAll(/`(\w+)`/g)].map((m) => [m[1], Number(status)])),
  );
  for (const [code, { status }] of Object.entries(PROBLEM_BY_CODE)) t.equal(statusOf.get(code), status, code);
  t.equal(statusOf.size, Object.keys(PROBLEM_BY_CODE).length, 'and no other code');
});

t.test('docs/design.md §3.4 lists every path of the OpenAPI document', async (t) => {
  const design = read('docs/design.md');
  const endpoints = design.slice(design.indexOf('### 3.4'), design.indexOf('### 3.5'));
  for (const path of Object.keys(parse(read('openapi.yaml')).paths))
    t.ok(endpoints.includes(`${path}\``) || endpoints.includes(`${path},`), path);
});

t.test('the decision index lists every note, and the README links the design', async (t) => {
  const index = read('docs/decisions/README.md');
  for (const note of readdirSync(join(root, 'docs/decisions')).filter((name) => /^\d{4}-.*\.md$/.test(name)))
    t.ok(index.includes(`](${note})`), `${note} is in the index`);
  t.ok(read('README.md').includes('](docs/design.md)'), 'README.md links docs/design.md');
  t.ok(read('BENCHMARKS.md').includes('](docs/performance-history.md)'), 'BENCHMARKS.md links its history');
});

t.test(
  'docs/configuration.md is what ConfigSchema generates (run `npm run config-doc` after changing a variable)',
  async (t) => {
    const page = read('docs/configuration.md');
    t.equal(renderConfigurationDoc(page), page);
    for (const name of Object.keys(ConfigSchema.properties)) t.ok(page.includes(`| \`${name}\` |`), name);
  },
);

t.test('the table of sizes asked of each OpenAI model (docs/models-and-backends.md) is the size plan', async (t) => {
  const page = read('docs/models-and-backends.md');
  const models = ['gpt-image-2', 'gpt-image-1', 'dall-e-3', 'dall-e-2'];
  const format = (size: { width: number; height: number }) => `${size.width}×${size.height}`;
  for (const ratio of ALL_ASPECT_RATIOS) {
    const sizes = Object.values(PIXEL_SIZES[ratio]).map(([width, height]) => ({ width, height }));
    const asked = models.map((model) => {
      const planned = sizes.map((size) => format(plannedSize(size, openAiSizeRule(model))));
      return new Set(planned).size === 1 ? planned[0] : planned.join(' / ');
    });
    const row = `| ${ratio} | ${sizes.map(format).join(' / ')} | ${asked.join(' | ')} |`;
    t.ok(page.includes(`\n${row}\n`), row);
  }
});

/** A Markdown file's text without its fenced code blocks and inline code, where a `](` is not a link. */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens. */
function anchorsOf(path: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(read(path)).matchAll(/^#{1,6} (.+)$/gm)) {
    const text = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

const markdownFiles = docFiles.filter((path) => path.endsWith('.md'));

t.test(
  'every relative link of README.md, BENCHMARKS.md and docs/ leads to a file, and its anchor to a heading',
  async (t) => {
    const broken: string[] = [];
    for (const file of markdownFiles) {
      for (const [, target] of prose(read(file)).matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split('#');
        const resolved = path === '' ? file : normalize(join(dirname(file), path));
        if (!existsSync(join(root, resolved))) broken.push(`${file}: ${target} (no ${resolved})`);
        else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    t.same(broken, []);
  },
);

t.test('the README links every page of docs/, and each page it links exists', async (t) => {
  const linked = new Set(
    [...prose(read('README.md')).matchAll(/\]\((docs\/[^)#\s]+\.md)(?:#[^)]*)?\)/g)].map((match) => match[1]),
  );
  for (const page of readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')))
    t.ok(linked.has(`docs/${page}`), `README.md links docs/${page}`);
  for (const page of linked) t.ok(existsSync(join(root, page)), `${page} exists`);
});

t.test('a newcomer reads the README in minutes: README.md ≤ 350 lines, BENCHMARKS.md ≤ 400', async (t) => {
  const lines = (path: string) => read(path).split('\n').length - 1;
  t.ok(lines('README.md') <= 350, `README.md has ${lines('README.md')} lines`);
  t.ok(lines('BENCHMARKS.md') <= 400, `BENCHMARKS.md has ${lines('BENCHMARKS.md')} lines`);
});

t.test(
  'every `FILE.md, "Title"` citation in code and docs names a heading or a labelled paragraph of that file',
  async (t) => {
    // A citation may run over a comment's line break; the lines are joined without their comment marks.
    const files = [...codeFiles, ...markdownFiles];
    const cited = files.flatMap((file) =>
      [
        ...read(file)
          .replace(/\n\s*(?:\*|\/\/|--|#)?\s*/g, ' ')
          .matchAll(/\b((?:docs\/[\w./-]+|BENCHMARKS|README)\.md|README), (?:section )?"([^"]+)"/g),
      ].map(([, path, title]) => ({ file, path: path === 'README' ? 'README.md' : path, title })),
    );
    t.ok(cited.length > 10, `sections are cited (${cited.length} citations found)`);
    const unknown = cited
      .filter(({ path, title }) => {
        if (!existsSync(join(root, path))) return true;
        // A heading or a paragraph's label ("Tried and not kept:"); a citation may leave out the heading's
        // parenthesis of dates and notes, or give only its start.
        const starts = [...read(path).matchAll(/^(?:#{1,6} |- )?(?:\*\*)?(.+)$/gm)].map((match) => match[1]);
        const bare = title.replace(/ \([^)]*\)$/, '');
        return !starts.some((start) => start.startsWith(bare));
      })
      .map(({ file, path, title }) => `${file}: ${path}, "${title}"`);
    t.same(unknown, [], 'no citation of a section that is not there');
  },
);
