/**
 * What every CLI command shares: stdout carries results (a new key alone on the last line), stderr
 * diagnostics; a CliError stops the command with its message alone (no stack trace).
 */
export const out = (line: string) => process.stdout.write(`${line}\n`);

export class CliError extends Error {}
