import { writeFileSync } from 'node:fs';
import { renderOpenApiYaml } from '../src/http/openapi-document.js';

writeFileSync(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml());
process.stdout.write('openapi.yaml written\n');
