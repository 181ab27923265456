/**
 * The console's script (decision 0037): the operators' pages over /admin/v1, plain DOM on the typed
 * client of clients/typescript, bundled by esbuild into dist/console/console.js. The admin key
 * lives in sessionStorage (this tab only); any 401 signs out and says why. Views are chosen by the
 * URL's fragment: #overview, #accounts, #accounts/<account_id>, #audit.
 */
import { createImageGenClient, type ImageGenClient, type paths, unwrap } from '../clients/typescript/index.js';
import { MODEL_IDS } from '../schemas/catalog.js';
import { $, asProblem, el, fillRows, type Refusal, showProblem, timeCell } from '../ui/dom.js';
import { drawUsageChart, lastDays, type UsageMetric, type UsageRow, usageTotalsTable } from '../ui/usage-chart.js';

type Json<P extends keyof paths, M extends 'get' | 'post' | 'patch', S extends 200 | 201> = paths[P][M] extends {
  responses: { [status in S]: { content: { 'application/json': infer Body } } };
}
  ? Body
  : never;
type Account = Json<'/admin/v1/accounts/{account_id}', 'get', 200>['data'];
type Key = Json<'/admin/v1/accounts/{account_id}/keys', 'get', 200>['data'][number];
type KeyRequest = NonNullable<
  paths['/admin/v1/accounts/{account_id}/keys']['post']['requestBody']
>['content']['application/json'];
type LedgerEntry = Json<'/admin/v1/accounts/{account_id}/ledger', 'get', 200>['data'][number];
type AuditEntry = Json<'/admin/v1/audit-log', 'get', 200>['data'][number];

const KEY_STORAGE = 'imagegen.console.adminKey';
const USAGE_DAYS = 30;
const PAGE = 20;
const OVERVIEW_CHARTS: UsageMetric[] = ['tasks', 'tokens_charged', 'failed', 'tokens_refunded'];
const ACCOUNT_CHARTS: UsageMetric[] = ['tasks', 'tokens_charged'];
const VIEWS = ['overview', 'accounts', 'account', 'audit'] as const;

/** Thrown after a 401 has signed the console out: the view that asked stops without a second message. */
class SignedOut extends Error {}

let client: ImageGenClient | undefined;
let accountsCursor: string | null = null;
let ledgerCursor: string | null = null;
let auditCursor: string | null = null;
/** The account the grant dialog applies to, and the Idempotency-Key of this one grant (kept across retries). */
let grantTarget: { account: Account; idempotencyKey: string } | undefined;

/** An admin call's data; a 401 signs out (the key was revoked, or never was one), any other refusal is thrown. */
async function admin<T>(request: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const result = await request;
  if (result.response.status === 401) {
    const problem = result.error as Refusal | undefined;
    signOut(
      `Signed out: the admin key was refused (401 ${problem?.code ?? 'unauthorized'}: ${problem?.detail ?? ''}).`,
    );
    throw new SignedOut();
  }
  // A 204 (a revocation) has no body for unwrap to return.
  if (result.response.status === 204) return undefined as T;
  return unwrap(result);
}

function api(): ImageGenClient {
  if (!client) throw new SignedOut();
  return client;
}

/** A view's failure in the page's alert; nothing for a sign-out, which has said why already. */
function report(error: unknown, box = $('problem')): void {
  if (error instanceof SignedOut) return;
  const { problem, status } = asProblem(error);
  showProblem(box, problem, status);
}

// --- sign in and out ---

async function signIn(key: string): Promise<void> {
  const candidate = createImageGenClient({ baseUrl: location.origin, apiKey: key });
  const state = $('sign-in-state');
  const check = await candidate.GET('/admin/v1/accounts', { params: { query: { limit: 1 } } });
  if (check.error) {
    const problem = check.error as Refusal;
    state.textContent = `The key was refused: ${check.response.status} ${problem.code}: ${problem.detail}`;
    state.dataset.state = 'bad';
    sessionStorage.removeItem(KEY_STORAGE);
    return;
  }
  client = candidate;
  sessionStorage.setItem(KEY_STORAGE, key);
  $<HTMLInputElement>('admin-key').value = '';
  state.textContent = '';
  delete state.dataset.state;
  $('sign-in-view').hidden = true;
  $('nav').hidden = false;
  document.body.dataset.signedIn = 'yes';
  await route();
}

function signOut(message: string): void {
  sessionStorage.removeItem(KEY_STORAGE);
  client = undefined;
  for (const view of VIEWS) $(`${view}-view`).hidden = true;
  hideNewKey();
  closeGrant();
  showProblem($('problem'), undefined);
  $('nav').hidden = true;
  $('sign-in-view').hidden = false;
  const state = $('sign-in-state');
  state.textContent = message;
  state.dataset.state = message.includes('refused') ? 'bad' : 'ok';
  delete document.body.dataset.signedIn;
  delete document.body.dataset.view;
  $('admin-key').focus();
}

// --- views ---

/** The view the fragment names, drawn afresh. */
async function route(): Promise<void> {
  if (!client) return;
  const [name, id] = location.hash.replace(/^#/, '').split('/');
  const view = name === 'accounts' && id ? 'account' : VIEWS.includes(name as never) ? name : 'overview';
  for (const other of VIEWS) $(`${other}-view`).hidden = other !== view;
  for (const link of $('nav').querySelectorAll<HTMLAnchorElement>('a[data-view]')) {
    const current = link.dataset.view === (view === 'account' ? 'accounts' : view);
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  showProblem($('problem'), undefined);
  hideNewKey();
  document.body.dataset.view = view;
  delete document.body.dataset.loaded;
  try {
    if (view === 'overview') await showOverview();
    else if (view === 'accounts') await showAccounts(true);
    else if (view === 'account') await showAccount(decodeURIComponent(id));
    else await showAudit(true);
    document.body.dataset.loaded = view;
  } catch (error) {
    report(error);
  }
}

function usageQuery(days: string[]) {
  return { from: days[0], to: days[days.length - 1], group_by: 'day,model' };
}

async function usageRows(days: string[], accountId?: string): Promise<UsageRow[]> {
  const report = await admin(
    api().GET('/admin/v1/usage', {
      params: { query: { ...usageQuery(days), ...(accountId ? { account_id: accountId } : {}) } },
    }),
  );
  return (report as { data: UsageRow[] }).data;
}

function drawCharts(prefix: string, metrics: UsageMetric[], rows: UsageRow[], days: string[]): void {
  for (const metric of metrics) drawUsageChart($(`${prefix}-${metric}`), rows, days, metric);
}

async function showOverview(): Promise<void> {
  const days = lastDays(USAGE_DAYS);
  const rows = await usageRows(days);
  $('overview-range').textContent = `Every account, ${days[0]} to ${days[days.length - 1]} (UTC), by day and model.`;
  drawCharts('overview', OVERVIEW_CHARTS, rows, days);
  $('overview-totals').replaceChildren(usageTotalsTable(rows, 'Totals per model, last 30 days'));
}

function statusText(account: Account): string {
  return account.status === 'active' ? 'active' : 'suspended';
}

function accountRow(account: Account): HTMLTableRowElement {
  const row = el(
    'tr',
    {},
    el('td', {}, el('a', { href: `#accounts/${account.account_id}`, textContent: account.name })),
    el('td', {}, el('span', { className: `status status-${account.status}`, textContent: statusText(account) })),
    el('td', { className: 'number', textContent: String(account.balance) }),
    timeCell(account.created_at),
    el(
      'td',
      { className: 'actions' },
      el('button', {
        type: 'button',
        textContent: account.status === 'active' ? 'Suspend' : 'Resume',
        ariaLabel: `${account.status === 'active' ? 'Suspend' : 'Resume'} ${account.name}`,
        onclick: () =>
          void toggleStatus(account)
            .then(() => showAccounts(true))
            .catch(report),
      }),
      el('button', {
        type: 'button',
        textContent: 'Grant…',
        ariaLabel: `Grant tokens to ${account.name}`,
        onclick: () => openGrant(account),
      }),
    ),
  );
  row.dataset.accountId = account.account_id;
  return row;
}

/** One page of accounts as the search form asks; `restart` reads from the first. */
async function showAccounts(restart: boolean): Promise<void> {
  if (restart) accountsCursor = null;
  const q = $<HTMLInputElement>('search-q').value.trim();
  const status = $<HTMLSelectElement>('search-status').value as Account['status'] | '';
  const page = await admin(
    api().GET('/admin/v1/accounts', {
      params: {
        query: {
          limit: PAGE,
          ...(q ? { q } : {}),
          ...(status ? { status } : {}),
          ...(accountsCursor ? { cursor: accountsCursor } : {}),
        },
      },
    }),
  );
  fillRows($('accounts'), page.data.map(accountRow), !restart);
  accountsCursor = page.next_cursor;
  $('accounts-more').hidden = page.next_cursor === null;
}

async function createAccount(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const name = $<HTMLInputElement>('new-account-name');
  const tokens = $<HTMLInputElement>('new-account-tokens');
  try {
    const account = (
      await admin(api().POST('/admin/v1/accounts', { body: { name: name.value, tokens: Number(tokens.value || 0) } }))
    ).data;
    name.value = '';
    tokens.value = '0';
    location.hash = `#accounts/${account.account_id}`;
  } catch (error) {
    report(error);
  }
}

async function toggleStatus(account: Account): Promise<Account | undefined> {
  try {
    return (
      await admin(
        api().PATCH('/admin/v1/accounts/{account_id}', {
          params: { path: { account_id: account.account_id } },
          body: { status: account.status === 'active' ? 'suspended' : 'active' },
        }),
      )
    ).data;
  } catch (error) {
    report(error);
    return undefined;
  }
}

function fact(term: string, value: Node | string): HTMLElement[] {
  return [el('dt', { textContent: term }), el('dd', {}, value)];
}

/** The account: its facts, usage, keys and first page of ledger. */
async function showAccount(accountId: string): Promise<void> {
  const path = { account_id: accountId };
  const days = lastDays(USAGE_DAYS);
  const [account, keys, rows] = await Promise.all([
    admin(api().GET('/admin/v1/accounts/{account_id}', { params: { path } })).then((r) => r.data),
    admin(api().GET('/admin/v1/accounts/{account_id}/keys', { params: { path } })).then((r) => r.data),
    usageRows(days, accountId),
  ]);
  renderAccount(account);
  drawCharts('account', ACCOUNT_CHARTS, rows, days);
  $('account-usage-totals').replaceChildren(
    usageTotalsTable(rows, `Totals per model, ${days[0]} to ${days[days.length - 1]}`),
  );
  fillKeys(keys);
  await showLedger(accountId, true);
}

function renderAccount(account: Account): void {
  $('account-heading').textContent = account.name;
  $('account-facts').replaceChildren(
    ...fact('Status', el('span', { className: `status status-${account.status}`, textContent: statusText(account) })),
    ...fact('Balance', `${account.balance} tokens`),
    ...fact('Account id', el('code', { textContent: account.account_id })),
    ...fact(
      'Created',
      el('time', { dateTime: account.created_at, textContent: new Date(account.created_at).toLocaleString() }),
    ),
  );
  const toggle = $<HTMLButtonElement>('account-status-toggle');
  toggle.textContent = account.status === 'active' ? 'Suspend account' : 'Resume account';
  toggle.onclick = () =>
    void toggleStatus(account).then((changed) => {
      if (changed) renderAccount(changed);
    });
  $<HTMLButtonElement>('account-grant').onclick = () => openGrant(account);
}

function budgetText(key: Key): string {
  if (!key.token_budget) return `${key.budget_spent} (no budget)`;
  const period = key.token_budget.period ? `a ${key.token_budget.period}` : 'in all';
  return `${key.budget_spent} of ${key.token_budget.tokens} ${period}`;
}

function rateText(key: Key): string {
  const { creates_per_min: creates, requests_per_min: requests } = key.rate_limits;
  if (creates === null && requests === null) return "the service's";
  return `${creates ?? 'default'} creates, ${requests ?? 'default'} requests a minute`;
}

function keyRow(key: Key): HTMLTableRowElement {
  const revoked = key.revoked_at !== null;
  const expired = key.expires_at !== null && Date.parse(key.expires_at) <= Date.now();
  const state = el('td', { textContent: revoked ? 'revoked ' : expired ? 'expired ' : 'active ' });
  if (revoked)
    state.append(el('time', { dateTime: key.revoked_at!, textContent: new Date(key.revoked_at!).toLocaleString() }));
  else
    state.append(
      el('button', {
        type: 'button',
        textContent: 'Revoke',
        ariaLabel: `Revoke key ${key.name}`,
        onclick: () => void revokeKey(key),
      }),
    );
  const row = el(
    'tr',
    {},
    el('td', { textContent: key.name }),
    el('td', {}, el('code', { textContent: key.prefix })),
    el('td', { textContent: key.models?.join(', ') ?? 'every model' }),
    el('td', { textContent: budgetText(key) }),
    el('td', { textContent: rateText(key) }),
    timeCell(key.expires_at, 'never'),
    timeCell(key.last_used_at, 'never'),
    state,
  );
  row.dataset.keyId = key.key_id;
  row.dataset.state = revoked ? 'revoked' : expired ? 'expired' : 'active';
  return row;
}

async function refreshKeys(accountId: string): Promise<void> {
  const keys = await admin(
    api().GET('/admin/v1/accounts/{account_id}/keys', { params: { path: { account_id: accountId } } }),
  );
  fillKeys(keys.data);
}

function fillKeys(keys: Key[]): void {
  const none = el('tr', {}, el('td', { colSpan: 8, className: 'hint', textContent: 'No keys yet.' }));
  fillRows($('keys'), keys.length ? keys.map(keyRow) : [none]);
}

async function revokeKey(key: Key): Promise<void> {
  if (!confirm(`Revoke the key “${key.name}” (${key.prefix}…)? Requests with it are refused at once.`)) return;
  try {
    await admin(api().DELETE('/admin/v1/keys/{key_id}', { params: { path: { key_id: key.key_id } } }));
    await refreshKeys(key.account_id);
  } catch (error) {
    report(error);
  }
}

function numberOrUndefined(id: string): number | undefined {
  const value = $<HTMLInputElement>(id).value.trim();
  return value === '' ? undefined : Number(value);
}

/** The form as the API's key request: only what was filled in. */
function keyRequest(): KeyRequest {
  const models = [...$('key-models').querySelectorAll<HTMLInputElement>('input:checked')].map((box) => box.value);
  const budget = numberOrUndefined('key-budget');
  const creates = numberOrUndefined('key-creates');
  const requests = numberOrUndefined('key-requests');
  const expires = $<HTMLInputElement>('key-expires').value;
  const period = $<HTMLSelectElement>('key-period').value;
  return {
    name: $<HTMLInputElement>('key-name').value,
    ...(models.length ? { models: models as KeyRequest['models'] } : {}),
    ...(budget !== undefined
      ? { token_budget: { tokens: budget, period: period ? (period as 'day' | 'month') : null } }
      : {}),
    ...(creates !== undefined || requests !== undefined
      ? {
          rate_limits: {
            ...(creates !== undefined ? { creates_per_min: creates } : {}),
            ...(requests !== undefined ? { requests_per_min: requests } : {}),
          },
        }
      : {}),
    // The field is read as UTC, as its label says.
    ...(expires ? { expires_at: new Date(`${expires}Z`).toISOString() } : {}),
  };
}

async function createKey(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const accountId = currentAccountId();
  if (!accountId) return;
  showProblem($('problem'), undefined);
  try {
    const created = (
      await admin(
        api().POST('/admin/v1/accounts/{account_id}/keys', {
          params: { path: { account_id: accountId } },
          body: keyRequest(),
        }),
      )
    ).data;
    $<HTMLFormElement>('new-key-form').reset();
    $<HTMLDetailsElement>('new-key-details').open = false;
    $('new-key-secret').textContent = created.key;
    $('new-key-copy').textContent = 'Copy the key';
    $('new-key').hidden = false;
    await refreshKeys(accountId);
  } catch (error) {
    report(error);
  }
}

/** The secret leaves the page: it was shown once. */
function hideNewKey(): void {
  $('new-key-secret').textContent = '';
  $('new-key').hidden = true;
}

function currentAccountId(): string | undefined {
  const [name, id] = location.hash.replace(/^#/, '').split('/');
  return name === 'accounts' && id ? decodeURIComponent(id) : undefined;
}

function ledgerRow(entry: LedgerEntry): HTMLTableRowElement {
  return el(
    'tr',
    {},
    timeCell(entry.created_at),
    el('td', { textContent: entry.kind }),
    el('td', { className: 'number', textContent: `${entry.kind === 'debit' ? '−' : '+'}${entry.amount}` }),
    el('td', { className: 'number', textContent: String(entry.balance_after) }),
    el('td', { textContent: entry.note ?? '' }),
    el('td', {}, entry.task_id ? el('code', { textContent: entry.task_id }) : ''),
  );
}

async function showLedger(accountId: string, restart: boolean): Promise<void> {
  if (restart) ledgerCursor = null;
  const page = await admin(
    api().GET('/admin/v1/accounts/{account_id}/ledger', {
      params: {
        path: { account_id: accountId },
        query: { limit: PAGE, ...(ledgerCursor ? { cursor: ledgerCursor } : {}) },
      },
    }),
  );
  fillRows($('ledger'), page.data.map(ledgerRow), !restart);
  ledgerCursor = page.next_cursor;
  $('ledger-more').hidden = page.next_cursor === null;
}

/**
 * An id in the audit log, on one line: its start is shown (CSS cuts the rest), the whole id stays
 * the text (found by the browser's search, copied, read to a screen reader) and shows on hover.
 */
function auditId(id: string): HTMLElement {
  return el('code', { className: 'id', textContent: id, title: id });
}

/** The request's target; an account's is a link to its page. */
function auditTarget(entry: AuditEntry): Node | string {
  if (!entry.target) return '';
  const id = auditId(entry.target);
  return entry.action.includes('/accounts/:account_id') ? el('a', { href: `#accounts/${entry.target}` }, id) : id;
}

function auditRow(entry: AuditEntry): HTMLTableRowElement {
  const row = el(
    'tr',
    {},
    timeCell(entry.created_at),
    el('td', {}, entry.admin_key_id ? auditId(entry.admin_key_id) : 'none'),
    el('td', { textContent: entry.action }),
    el('td', {}, auditTarget(entry)),
    el('td', { className: 'number', textContent: String(entry.status) }),
    el('td', {}, auditId(entry.request_id)),
    el('td', { textContent: entry.client_address }),
  );
  row.dataset.status = String(entry.status);
  return row;
}

async function showAudit(restart: boolean): Promise<void> {
  if (restart) auditCursor = null;
  const page = await admin(
    api().GET('/admin/v1/audit-log', {
      params: { query: { limit: PAGE, ...(auditCursor ? { cursor: auditCursor } : {}) } },
    }),
  );
  fillRows($('audit'), page.data.map(auditRow), !restart);
  auditCursor = page.next_cursor;
  $('audit-more').hidden = page.next_cursor === null;
}

// --- grants ---

function openGrant(account: Account): void {
  grantTarget = { account, idempotencyKey: crypto.randomUUID() };
  $('grant-account').textContent = account.name;
  $<HTMLFormElement>('grant-form').reset();
  showProblem($('grant-problem'), undefined);
  $<HTMLDialogElement>('grant-dialog').showModal();
}

function closeGrant(): void {
  grantTarget = undefined;
  const dialog = $<HTMLDialogElement>('grant-dialog');
  if (dialog.open) dialog.close();
}

/**
 * POST …/grants with the dialog's Idempotency-Key: a second press after a timeout is the same
 * grant, applied once. A refusal (an adjustment below zero: 409) shows the problem's detail.
 */
async function applyGrant(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  if (!grantTarget) return;
  const { account, idempotencyKey } = grantTarget;
  const reference = $<HTMLInputElement>('grant-reference').value.trim();
  try {
    await admin(
      api().POST('/admin/v1/accounts/{account_id}/grants', {
        params: { path: { account_id: account.account_id }, header: { 'idempotency-key': idempotencyKey } },
        body: {
          tokens: Number($<HTMLInputElement>('grant-tokens').value),
          note: $<HTMLInputElement>('grant-note').value,
          ...(reference ? { reference } : {}),
        },
      }),
    );
    closeGrant();
    await route();
  } catch (error) {
    report(error, $('grant-problem'));
  }
}

// --- wiring ---

function wire(): void {
  const models = $('key-models');
  for (const model of MODEL_IDS) {
    const box = document.createElement('input');
    Object.assign(box, { type: 'checkbox', name: 'models', value: String(model) });
    models.append(el('label', { className: 'check' }, box, ` ${model}`));
  }
  $('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = $<HTMLInputElement>('admin-key').value.trim();
    if (key) void signIn(key);
  });
  $('sign-out').addEventListener('click', () => signOut('Signed out; the key is gone from this tab.'));
  window.addEventListener('hashchange', () => void route());
  $('account-search').addEventListener('submit', (event) => {
    event.preventDefault();
    void showAccounts(true).catch(report);
  });
  $('search-status').addEventListener('change', () => void showAccounts(true).catch(report));
  $('accounts-more').addEventListener('click', () => void showAccounts(false).catch(report));
  $('new-account-form').addEventListener('submit', (event) => void createAccount(event as SubmitEvent));
  $('new-key-form').addEventListener('submit', (event) => void createKey(event as SubmitEvent));
  $('new-key-done').addEventListener('click', hideNewKey);
  $('new-key-copy').addEventListener('click', () => {
    void navigator.clipboard.writeText($('new-key-secret').textContent ?? '').then(
      () => ($('new-key-copy').textContent = 'Copied'),
      () => ($('new-key-copy').textContent = 'Copy refused: select the key by hand'),
    );
  });
  $('ledger-more').addEventListener('click', () => {
    const accountId = currentAccountId();
    if (accountId) void showLedger(accountId, false).catch(report);
  });
  $('audit-more').addEventListener('click', () => void showAudit(false).catch(report));
  $('grant-form').addEventListener('submit', (event) => void applyGrant(event as SubmitEvent));
  $('grant-cancel').addEventListener('click', closeGrant);
  $('grant-dialog').addEventListener('close', () => (grantTarget = undefined));
  const saved = sessionStorage.getItem(KEY_STORAGE);
  if (saved) void signIn(saved);
}

wire();
