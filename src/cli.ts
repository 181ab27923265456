#!/usr/bin/env node
import { ConfigError, ConfigSchema, loadConfig } from './config.js';
import { DomainError } from './core/errors.js';
import { CliError, out } from './cli-output.js';

/*
 * Each command loads what it runs with import() (src/cli-serve.ts, src/cli-keys.ts): a `keys` or
 * `models` process does not load the web server, the worker and the image library.
 */

const USAGE = `Usage: imagegen <command> [options]

Commands:
  serve                                   API and in-process workers (the embedded default)
  api                                     API only
  worker                                  task worker only (/metrics on WORKER_METRICS_PORT)
  migrate                                 bring the database schema up to date
  keys create --name N --tokens T         new account with T tokens and its first key
  keys create --account ID [--name N]     another key for an existing account
  keys list [--account ID]                keys (prefix, name, created, last used; never the key)
  keys revoke ID_OR_PREFIX                revoke a key with immediate effect
  tokens grant --account ID --tokens T [--note TEXT]
  admin-keys create --name N              a key for /admin/v1 (never an account's); printed once
  admin-keys list                         admin keys (prefix, name, created, last used; never the key)
  admin-keys revoke ID_OR_PREFIX          revoke an admin key
  models                                  the price table: each model's tokens per resolution, ratios, references
  config                                  every configuration variable with its default and description

Configuration comes from environment variables (and an optional .env file); see docs/configuration.md.`;

/** The optional `.env` of the working directory; a variable already in the environment wins over it. */
function loadDotEnv(): void {
  try {
    process.loadEnvFile();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * The commands that print what the schemas say: they need neither a valid environment nor the
 * store, so an operator can read them before configuring anything.
 */
const REFERENCE_COMMANDS: Record<string, () => Promise<string>> = {
  config: async () => (await import('./cli-tables.js')).configurationHelp(ConfigSchema),
  models: async () => {
    const [{ priceTable }, { MODEL_CATALOG }] = await Promise.all([
      import('./cli-tables.js'),
      import('../schemas/catalog.js'),
    ]);
    return priceTable(MODEL_CATALOG);
  },
};

async function main(argv: string[]): Promise<number> {
  loadDotEnv();
  const [command, subcommand, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    out(USAGE);
    return command ? 0 : 1;
  }
  const reference = REFERENCE_COMMANDS[command];
  if (reference) {
    out(await reference());
    return 0;
  }
  const config = loadConfig(process.env);
  switch (command) {
    case 'serve':
      return (await import('./cli-serve.js')).serve(config, { workers: config.WORKER_CONCURRENCY });
    case 'api':
      return (await import('./cli-serve.js')).serve(config, { workers: 0 });
    case 'worker':
      return (await import('./cli-serve.js')).workerCommand(config);
    case 'migrate':
      return (await import('./cli-keys.js')).migrateCommand(config);
    case 'keys':
      return (await import('./cli-keys.js')).keysCommand(config, subcommand, rest);
    case 'tokens':
      return (await import('./cli-keys.js')).tokensCommand(config, subcommand, rest);
    case 'admin-keys':
      return (await import('./cli-keys.js')).adminKeysCommand(config, subcommand, rest);
    default:
      process.stderr.write(`Unknown command "${command}".\n\n${USAGE}\n`);
      return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const known = error instanceof CliError || error instanceof ConfigError || error instanceof DomainError;
    process.stderr.write(known ? `${(error as Error).message}\n` : `${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
