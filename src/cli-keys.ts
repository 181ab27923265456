import { parseArgs } from 'node:util';
import type { Config } from './config.js';
import { openRuntime, type Runtime } from './runtime.js';
import { issueAdminKey } from './services/admin-keys.js';
import { createAccountWithKey, issueApiKey } from './services/api-keys.js';
import { CliError, out } from './cli-output.js';

/**
 * The CLI's one-shot commands on the store (`migrate`, `keys`, `tokens`, `admin-keys`): each opens
 * the runtime, migrates, does its step and closes. Loaded by src/cli.ts for these commands only,
 * so that none of them loads the web server or the worker.
 */

export async function migrateCommand(config: Config): Promise<number> {
  return withRuntime(config, async () => {
    out('Database schema is up to date.');
  });
}

async function withRuntime(config: Config, fn: (runtime: Runtime) => Promise<void>): Promise<number> {
  const runtime = await openRuntime(config);
  try {
    await fn(runtime);
    return 0;
  } finally {
    await runtime.close();
  }
}

export async function keysCommand(config: Config, subcommand: string | undefined, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { name: { type: 'string' }, tokens: { type: 'string' }, account: { type: 'string' } },
  });
  return withRuntime(config, async ({ store }) => {
    const now = new Date();
    switch (subcommand) {
      case 'create': {
        if (values.account) {
          const account = await store.accounts.getAccount(values.account);
          if (!account) throw new CliError(`No account ${values.account}.`);
          const { key, record } = await issueApiKey(store, account.id, values.name ?? 'key', now);
          out(`Key ${record.id} (${record.prefix}…) for account ${account.id}. Shown once; store it now:`);
          out(key);
          return;
        }
        if (!values.name) throw new CliError('keys create needs --name N --tokens T, or --account ID.');
        const tokens = parseTokens(values.tokens ?? '0');
        const { account, key } = await createAccountWithKey(store, { name: values.name, tokens, now });
        out(`Account ${account.id} "${account.name}" with ${account.balance} tokens. Key shown once; store it now:`);
        out(key);
        return;
      }
      case 'list': {
        const keys = await store.accounts.listApiKeys(values.account);
        out(['KEY_ID', 'ACCOUNT', 'PREFIX', 'NAME', 'CREATED', 'LAST_USED', 'REVOKED'].join('\t'));
        for (const k of keys) {
          out([k.id, k.accountId, k.prefix, k.name, ...keyDates(k)].join('\t'));
        }
        return;
      }
      case 'revoke': {
        const target = positionals[0];
        if (!target) throw new CliError('keys revoke needs a key id or prefix.');
        if (!(await store.accounts.revokeApiKey(target, now))) throw new CliError(`No active key ${target}.`);
        out(`Revoked ${target}.`);
        return;
      }
      default:
        throw new CliError('keys needs one of: create, list, revoke.');
    }
  });
}

export async function adminKeysCommand(
  config: Config,
  subcommand: string | undefined,
  args: string[],
): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { name: { type: 'string' } } });
  return withRuntime(config, async ({ store }) => {
    const now = new Date();
    switch (subcommand) {
      case 'create': {
        if (!values.name) throw new CliError('admin-keys create needs --name N.');
        const { key, record } = await issueAdminKey(store, values.name, now);
        out(`Admin key ${record.id} (${record.prefix}…) "${record.name}". Shown once; store it now:`);
        out(key);
        return;
      }
      case 'list': {
        out(['KEY_ID', 'PREFIX', 'NAME', 'CREATED', 'LAST_USED', 'REVOKED'].join('\t'));
        for (const k of await store.admin.listAdminKeys()) out([k.id, k.prefix, k.name, ...keyDates(k)].join('\t'));
        return;
      }
      case 'revoke': {
        const target = positionals[0];
        if (!target) throw new CliError('admin-keys revoke needs a key id or prefix.');
        if (!(await store.admin.revokeAdminKey(target, now))) throw new CliError(`No active admin key ${target}.`);
        out(`Revoked ${target}.`);
        return;
      }
      default:
        throw new CliError('admin-keys needs one of: create, list, revoke.');
    }
  });
}

export async function tokensCommand(config: Config, subcommand: string | undefined, args: string[]): Promise<number> {
  if (subcommand !== 'grant') throw new CliError('tokens needs: grant --account ID --tokens T.');
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, tokens: { type: 'string' }, note: { type: 'string' } },
  });
  if (!values.account || !values.tokens) throw new CliError('tokens grant needs --account ID --tokens T.');
  const amount = parseTokens(values.tokens);
  if (amount === 0) throw new CliError('--tokens must be at least 1.');
  return withRuntime(config, async ({ store }) => {
    const account = await store.accounts.grantTokens({
      accountId: values.account!,
      amount,
      note: values.note ?? null,
      now: new Date(),
    });
    out(`Granted ${amount} tokens to ${account.id}; balance ${account.balance}.`);
  });
}

function parseTokens(text: string): number {
  if (!/^\d{1,12}$/.test(text)) throw new CliError(`--tokens must be a whole number, got "${text}".`);
  return Number(text);
}

/** When a key (an account's or an admin's) was made, last used and revoked, as the key tables print them. */
function keyDates(key: { createdAt: Date; lastUsedAt: Date | null; revokedAt: Date | null }): string[] {
  return [key.createdAt.toISOString(), key.lastUsedAt?.toISOString() ?? '-', key.revokedAt?.toISOString() ?? '-'];
}
