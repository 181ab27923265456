import { createHash } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

/**
 * Checks answers against the committed openapi.yaml, as a generated client or a validating proxy
 * (Prism) would: the status must be one the operation declares, and a JSON body must match the
 * schema declared for its status and media type. buildTestApp runs it on every inject, so a
 * response that breaks the contract (a ledger id that is not a uuid, an attempt list past its
 * maxItems) fails the test that produced it.
 */
interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: object }> }>;
}

const JSON_TYPES = new Set(['application/json', 'application/problem+json']);

export class OpenApiResponseValidator {
  private readonly ajv: Ajv2020;
  private readonly paths: { pattern: RegExp; path: string; operations: Record<string, Operation> }[];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(document: { paths: Record<string, Record<string, Operation>> }) {
    // validateSchema off: the document is not itself a JSON Schema to check against the meta-schema
    // (that check cost a tenth of a second in every test process); its schemas are checked where
    // openapi.yaml is written (test/http/openapi.test.ts).
    this.ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true, validateSchema: false });
    (addFormats as unknown as (a: Ajv2020) => void)(this.ajv);
    this.ajv.addSchema({ ...document, $id: 'openapi' });
    // Literal paths first: /webhooks/secret is not a /webhooks/{id}.
    this.paths = Object.entries(document.paths)
      .map(([path, operations]) => ({
        path,
        operations,
        pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
      }))
      .sort((a, b) => (a.path.match(/\{/g)?.length ?? 0) - (b.path.match(/\{/g)?.length ?? 0));
  }

  /** What breaks the contract in this answer, or null. Answers of no documented operation pass. */
  check(method: string, url: string, status: number, contentType: string | undefined, body: string): string | null {
    // The path the server was asked for: inject, like curl and browsers, resolves dot segments
    // (`/generations/.` is the list, not a task), so match what the WHATWG URL parser makes of it.
    const path = new URL(url, 'http://localhost').pathname;
    const found = this.paths.find((p) => p.pattern.test(path));
    const verb = method.toLowerCase();
    const operation = found?.operations[verb];
    if (!found || !operation || verb === 'head') return null;
    const where = `${method} ${found.path} → ${status}`;
    const declared = operation.responses[String(status)] ?? operation.responses.default;
    if (!declared) return `${where}: the operation declares no ${status} response`;
    const mediaType = contentType?.split(';', 1)[0].trim() ?? '';
    if (!JSON_TYPES.has(mediaType) || status === 204 || body === '') return null;
    if (!declared.content?.[mediaType]) return `${where}: ${mediaType} is not a declared media type`;
    const pointer = ['paths', found.path, verb, 'responses', String(status), 'content', mediaType, 'schema']
      .map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1'))
      .join('/');
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `openapi#/${pointer}` });
      this.compiled.set(pointer, validate);
    }
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return `${where}: the body is not JSON`;
    }
    if (validate(value)) return null;
    return `${where}: ${this.ajv.errorsText(validate.errors, { dataVar: 'body' })}`;
  }
}

let shared: OpenApiResponseValidator | null = null;

/** The validator of the committed openapi.yaml, read once per test process. */
export function contractValidator(): OpenApiResponseValidator {
  shared ??= new OpenApiResponseValidator(parsedOpenApi() as ConstructorParameters<typeof OpenApiResponseValidator>[0]);
  return shared;
}

/**
 * openapi.yaml as an object. Parsing the YAML takes about 0.2 s, in each of the suite's ~200 test
 * processes; so the first parses it and leaves it as JSON in the temp directory, under a name made
 * of the YAML's hash (a changed openapi.yaml is parsed again), and the others read that.
 */
function parsedOpenApi(): unknown {
  const text = readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8');
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const cached = join(tmpdir(), `imagegen-openapi-${digest}.json`);
  try {
    return JSON.parse(readFileSync(cached, 'utf8'));
  } catch {
    const document = parse(text) as unknown;
    // Written aside and renamed: a process reading it at the same time sees all of it or none.
    const partial = `${cached}.${process.pid}`;
    writeFileSync(partial, JSON.stringify(document));
    renameSync(partial, cached);
    return document;
  }
}
