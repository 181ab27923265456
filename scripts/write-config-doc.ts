import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderConfigurationDoc } from './configuration-doc.js';

const pagePath = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
writeFileSync(pagePath, renderConfigurationDoc(readFileSync(pagePath, 'utf8')));
process.stdout.write('docs/configuration.md written\n');
