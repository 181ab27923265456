import type { TObject, TSchema } from '@sinclair/typebox';
import type { ModelCatalogEntry } from '../schemas/model-entry.js';

/**
 * The CLI's two reference texts, `imagegen config` and `imagegen models`, read from the schemas
 * themselves (ConfigSchema, the model catalog), so that neither can fall behind what the service
 * accepts and charges. Plain text in aligned columns: for a terminal, grep and a diff.
 */

/** Rows as columns padded to their widest cell; the last column is not padded. */
export function alignedColumns(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  return rows
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '))
    .join('\n');
}

/** What a variable is when unset: its default, or "-" (unset means what its description says). */
function defaultText(schema: TSchema): string {
  if (schema.default === undefined) return '-';
  if (schema.default === '') return '""';
  return String(schema.default);
}

/** The values a variable takes when they are a closed list (a union of literals), else none. */
function allowedValues(schema: TSchema): string[] {
  const branches = (schema.anyOf ?? []) as TSchema[];
  return branches.every((branch) => branch.const !== undefined) ? branches.map((branch) => String(branch.const)) : [];
}

/** What a variable is for: its description, or the values it takes when those say all there is (LOG_LEVEL). */
function descriptionOf(schema: TSchema): string {
  const values = allowedValues(schema);
  return schema.description ?? (values.length > 0 ? `One of ${values.join(', ')}.` : '');
}

/**
 * Every configuration variable with its default and description, in ConfigSchema's order; the
 * per-model variables appear once per model of the list, as ConfigSchema holds them.
 */
export function configurationHelp(schema: TObject): string {
  const rows = Object.entries(schema.properties).map(([name, variable]) => [
    name,
    defaultText(variable),
    descriptionOf(variable),
  ]);
  return alignedColumns([['VARIABLE', 'DEFAULT', 'DESCRIPTION'], ...rows]);
}

/** A cell of a Markdown table: a `|` would end the cell, a `<` could open an HTML tag. */
function markdownCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('<', '&lt;');
}

/**
 * The same rows as `configurationHelp`, as the Markdown table of docs/configuration.md. A default
 * that differs from machine to machine (`defaultText` in the schema) is named, not this machine's.
 */
export function configurationTable(schema: TObject): string {
  const rows = Object.entries(schema.properties).map(([name, variable]) => {
    const unset = variable.default === undefined ? 'unset' : variable.default === '' ? 'empty' : undefined;
    const byDefault = variable.defaultText ?? unset ?? `\`${String(variable.default)}\``;
    return `| \`${name}\` | ${markdownCell(byDefault)} | ${markdownCell(descriptionOf(variable))} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** Each model of the catalog: its token price per resolution, aspect ratios, references and prompt length. */
export function priceTable(catalog: readonly ModelCatalogEntry[]): string {
  const rows = catalog.map((model) => [
    model.id,
    model.resolutions.map((resolution) => `${resolution} ${model.prices[resolution]}`).join(', '),
    `${model.defaults.resolution}, ${model.defaults.aspectRatio}`,
    model.aspectRatios.join(' '),
    `${model.imageReferenceCount.min}-${model.imageReferenceCount.max} (or none)`,
    `${model.promptLength.min}-${model.promptLength.max}`,
  ]);
  return alignedColumns([
    ['MODEL', 'TOKENS PER IMAGE', 'DEFAULT', 'ASPECT RATIOS', 'IMAGE REFERENCES', 'PROMPT LENGTH'],
    ...rows,
  ]);
}
