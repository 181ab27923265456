import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderOpenApiYaml } from './openapi-document.js';
import { generateClientTypes } from './client-types.js';

const documentPath = fileURLToPath(new URL('../openapi.yaml', import.meta.url));
writeFileSync(documentPath, await renderOpenApiYaml());
process.stdout.write('openapi.yaml written\n');

const typesPath = fileURLToPath(new URL('../clients/typescript/schema.d.ts', import.meta.url));
writeFileSync(typesPath, await generateClientTypes(documentPath));
process.stdout.write('clients/typescript/schema.d.ts written\n');
