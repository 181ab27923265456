import { configurationTable } from '../src/cli-tables.js';
import { ConfigSchema } from '../src/config.js';

/**
 * docs/configuration.md's table of variables, generated from ConfigSchema as `imagegen config`
 * prints it, between two markers; the text around them is written by hand and kept. A build tool,
 * not part of the service: `npm run config-doc` writes it, a test compares.
 */
export const BEGIN =
  '<!-- config:begin (generated from ConfigSchema by `npm run config-doc`; edit outside these markers) -->';
export const END = '<!-- config:end -->';

/** The page with its generated table made again from ConfigSchema, every other line as it is. */
export function renderConfigurationDoc(current: string): string {
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  if (start === -1 || end === -1 || end < start)
    throw new Error('docs/configuration.md has no markers to write between');
  return `${current.slice(0, start + BEGIN.length)}\n${configurationTable(ConfigSchema)}\n${current.slice(end)}`;
}
