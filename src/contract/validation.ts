import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { DomainError, type FieldError } from '../core/errors.js';
import { GENERATION_REQUEST_SCHEMAS, GenerationRequest } from '../../schemas/catalog.js';
import { NON_BLANK_PATTERN } from '../../schemas/model-entry.js';
import { MAX_FIELD_ERRORS, SHARED_SCHEMAS } from '../../schemas/resources.js';
import { escapePointer } from './problems.js';

/**
 * Two explicitly configured Ajv instances (docs/design.md §6). Bodies are validated exactly as sent: no
 * removal of unknown fields, no type coercion, no defaults injected (the core applies defaults).
 * Query strings and path parameters arrive as text, so only they coerce ("20" → 20).
 * allErrors is on: a request with several invalid fields is told about each of them at once
 * (bounded by MAX_FIELD_ERRORS), not one per round trip. The body's `oneOf` is discriminated, so
 * only the chosen model's schema is checked and its errors name that model's fields.
 */
const AJV_OPTIONS: Options = {
  removeAdditional: false,
  useDefaults: false,
  allErrors: true,
  discriminator: true,
  strict: true,
  strictRequired: false,
  // TypeBox and OpenAPI annotations that are not validation keywords.
  keywords: ['example', 'x-examples'],
};

/**
 * The Ajv of JSON bodies, wherever they arrive: the routes' body validator and the MCP tools'
 * arguments alike, so that the same value is refused with the same field errors.
 */
export function bodyAjv(externalSchemas: readonly object[]): Ajv {
  return makeAjv({ ...AJV_OPTIONS, coerceTypes: false }, externalSchemas);
}

let generationRequestValidator: ValidateFunction | undefined;

/**
 * The create body's validator (a `oneOf` over every model, discriminated on `model`), compiled
 * once per process: the native create and estimate routes and the MCP tools all check a body with
 * this one, so that the same body is refused with the same field errors on every face.
 */
export function validateGenerationRequest(): ValidateFunction {
  generationRequestValidator ??= bodyAjv([...GENERATION_REQUEST_SCHEMAS, ...SHARED_SCHEMAS]).compile(GenerationRequest);
  return generationRequestValidator;
}

/** The Ajv of query strings and path parameters, which arrive as text and so coerce ("20" → 20). */
export function textAjv(externalSchemas: readonly object[]): Ajv {
  return makeAjv({ ...AJV_OPTIONS, coerceTypes: true }, externalSchemas);
}

/** The 400 of a value that failed its schema: every field error, and the first one as the detail. */
export function invalidRequestOf(errors: readonly ErrorObject[], context: string | undefined): DomainError {
  const fieldErrors = fieldErrorsOf(errors, context);
  const first = fieldErrors[0];
  return new DomainError(
    'invalid_request',
    first ? `${first.location} ${first.pointer || '(root)'}: ${first.detail}` : 'The request is invalid.',
    fieldErrors,
  );
}

function makeAjv(options: Options, externalSchemas: readonly object[]): Ajv {
  const ajv = new Ajv(options);
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  for (const schema of externalSchemas) ajv.addSchema(schema);
  return ajv;
}

/**
 * Ajv coerces the text "Infinity" (and "1e309") to the number Infinity, and then skips `minimum`
 * and `maximum`, which it only applies to finite numbers: `limit=Infinity` passed a schema that
 * says at most 100, and `wait=Infinity` held a long-poll for as long as its task lived. A query or
 * path value coerced to a number that is not finite is refused here, as the schema means to.
 */
export function refusingNonFiniteNumbers(validate: ValidateFunction): (data: unknown) => boolean {
  const checked = Object.assign(
    (data: unknown): boolean => {
      if (!validate(data)) {
        checked.errors = validate.errors;
        return false;
      }
      const pointer = nonFiniteNumberPointer(data);
      checked.errors =
        pointer === null
          ? null
          : [{ keyword: 'finite', instancePath: pointer, schemaPath: '#', params: {}, message: 'must be finite' }];
      return pointer === null;
    },
    { errors: null as ValidateFunction['errors'] },
  );
  return checked;
}

/** Query strings and path parameters are flat: values, or arrays of values for a repeated name. */
function nonFiniteNumberPointer(data: unknown): string | null {
  if (data === null || typeof data !== 'object') return typeof data === 'number' && !Number.isFinite(data) ? '' : null;
  for (const [name, value] of Object.entries(data)) {
    const values: unknown[] = Array.isArray(value) ? value : [value];
    const at = values.findIndex((v) => typeof v === 'number' && !Number.isFinite(v));
    if (at >= 0) return `/${escapePointer(name)}${Array.isArray(value) ? `/${at}` : ''}`;
  }
  return null;
}

const LOCATION_BY_CONTEXT: Record<string, FieldError['location']> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/**
 * Ajv's errors as field errors, one per field (the first Ajv found: a prompt of one space is too
 * short and blank, and saying the first is enough), in the order of the schema, at most
 * MAX_FIELD_ERRORS.
 */
export function fieldErrorsOf(errors: readonly ErrorObject[], context: string | undefined): FieldError[] {
  const byPointer = new Map<string, FieldError>();
  for (const error of errors) {
    const fieldError = fieldErrorOf(error, context);
    if (!byPointer.has(fieldError.pointer)) byPointer.set(fieldError.pointer, fieldError);
    if (byPointer.size === MAX_FIELD_ERRORS) break;
  }
  return [...byPointer.values()];
}

/** One Ajv error as a field error: a JSON Pointer to the offending field and a stable code. */
export function fieldErrorOf(error: ErrorObject, context: string | undefined): FieldError {
  const location = LOCATION_BY_CONTEXT[context ?? 'body'] ?? 'body';
  const params = error.params as Record<string, unknown>;
  let pointer = error.instancePath;
  let code: string;
  let detail: string;
  switch (error.keyword) {
    case 'required':
      pointer += `/${escapePointer(String(params.missingProperty))}`;
      code = 'required';
      detail = 'This field is required.';
      break;
    case 'additionalProperties':
      pointer += `/${escapePointer(String(params.additionalProperty))}`;
      code = 'unknown_field';
      detail = 'This field is not part of the request; check its spelling.';
      break;
    case 'discriminator':
      pointer += `/${String(params.tag)}`;
      code = params.error === 'tag' ? 'required' : 'not_allowed';
      detail = params.error === 'tag' ? 'A string `model` is required.' : 'Unknown model; see GET /api/v1/models.';
      break;
    case 'enum':
      code = 'not_allowed';
      detail = `Must be one of: ${(params.allowedValues as unknown[]).join(', ')}.`;
      break;
    case 'const':
      code = 'not_allowed';
      detail = `Must be ${JSON.stringify(params.allowedValue)}.`;
      break;
    case 'minLength':
      code = 'too_short';
      detail = `Must be at least ${params.limit} characters (Unicode code points) long.`;
      break;
    case 'maxLength':
      code = 'too_long';
      detail = `Must be at most ${params.limit} characters (Unicode code points) long.`;
      break;
    case 'minItems':
      code = 'too_few_items';
      detail = `Must have at least ${params.limit} items.`;
      break;
    case 'maxItems':
      code = 'too_many_items';
      detail = `Must have at most ${params.limit} items.`;
      break;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      code = 'out_of_range';
      detail = `Must be ${COMPARISON_WORDS[String(params.comparison)] ?? String(params.comparison)} ${params.limit}.`;
      break;
    case 'finite':
      code = 'out_of_range';
      detail = 'Must be a finite number within the documented range.';
      break;
    case 'type':
      code = 'wrong_type';
      detail = `Must be of type ${params.type}.`;
      break;
    case 'pattern':
    case 'format':
      code = 'invalid_format';
      detail =
        error.keyword === 'format'
          ? `Must be a valid ${params.format}.`
          : (PATTERN_DETAILS[String(params.pattern)] ?? 'Does not have the expected format.');
      break;
    default:
      code = 'invalid';
      detail = error.message ? sentence(error.message) : 'Invalid value.';
  }
  return { pointer, location, code, detail };
}

/** What a pattern of the contract asks for, where its text alone does not say it. */
const PATTERN_DETAILS: Record<string, string> = {
  [NON_BLANK_PATTERN]: 'Must contain a character other than whitespace, and no U+0000.',
};

const COMPARISON_WORDS: Record<string, string> = {
  '<=': 'at most',
  '>=': 'at least',
  '<': 'less than',
  '>': 'more than',
};

/** Ajv's message ("must be …") as a sentence: a capital first, a full stop last. */
function sentence(message: string): string {
  const text = message.charAt(0).toUpperCase() + message.slice(1);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}
