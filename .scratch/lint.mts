import { readFileSync } from 'node:fs';
import { lintWithRedocly, lintWithSpectral } from '../test/helpers/api-linters.js';
const text = readFileSync(process.argv[2] ?? '/work/wt-22/openapi.yaml', 'utf8');
const r = await lintWithRedocly(text);
const s = await lintWithSpectral(text);
const summarize = (name: string, f: any[]) => {
  const by = new Map<string, number>();
  for (const x of f) by.set(`${x.severity} ${x.rule}`, (by.get(`${x.severity} ${x.rule}`) ?? 0) + 1);
  console.log(name, f.length, [...by].map(([k, v]) => `${k}: ${v}`).join('\n  '));
};
summarize('redocly', r); summarize('spectral', s);
if (process.env.V) for (const x of [...r, ...s]) console.log(x.severity, x.rule, x.path, x.message.slice(0, 150));
