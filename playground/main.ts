/**
 * The Playground's script (decision 0020): plain DOM on the typed client of clients/typescript,
 * bundled by esbuild into dist/playground/playground.js. It calls only this page's origin (and
 * the task's signed stream_url, which names PUBLIC_BASE_URL); the key lives in sessionStorage.
 */
import {
  createImageGenClient,
  type components,
  type ImageGenClient,
  type Media,
  type paths,
  type Task,
  TERMINAL_STATUSES,
  uploadMedia,
  unwrap,
} from '../clients/typescript/index.js';
import { $, asProblem, el, fillRows, type Refusal, showProblem as showProblemIn, timeCell } from '../ui/dom.js';
import { drawUsageChart, lastDays, type UsageRow, usageTotalsTable } from '../ui/usage-chart.js';

type Model = components['schemas']['Model'];
type GenerationRequest = paths['/api/v1/images/generations']['post']['requestBody']['content']['application/json'];
type LedgerEntry = components['schemas']['LedgerEntry'];
type AccountKey = paths['/api/v1/keys']['get']['responses'][200]['content']['application/json']['data'][number];
type TaskStatus = Task['status'];

const KEY_STORAGE = 'imagegen.playground.apiKey';
const LEDGER_ENTRIES = 10;
const HISTORY_PAGE = 12;
const USAGE_DAYS = 30;

let client: ImageGenClient | undefined;
let models: Model[] = [];
/** Uploaded references, each with a local preview (its media content needs the key, which an img cannot send). */
let references: (Media & { preview: string })[] = [];
let running: { task: Task; source: EventSource } | undefined;
let historyCursor: string | null = null;

/** The problem+json of a refused request in the page's alert, with its stable code and its detail. */
function showProblem(problem: Refusal | undefined, status?: number): void {
  showProblemIn($('problem'), problem, status);
}

function currentModel(): Model {
  const id = $<HTMLSelectElement>('model').value;
  return models.find((m) => m.id === id) ?? models[0];
}

function codePoints(text: string): number {
  return [...text].length;
}

function formBody(): GenerationRequest {
  const model = currentModel();
  return {
    model: model.id,
    prompt: $<HTMLTextAreaElement>('prompt').value,
    parameters: {
      aspect_ratio: $<HTMLSelectElement>('aspect-ratio').value,
      resolution: $<HTMLSelectElement>('resolution').value,
      output_format: $<HTMLSelectElement>('output-format').value,
    },
    ...(references.length ? { image_reference: references.map((r) => r.media_id) } : {}),
  } as GenerationRequest;
}

const OUTPUT_FORMAT_LABELS: Record<string, string> = {
  png: 'PNG (lossless)',
  jpeg: 'JPEG (smaller)',
  webp: 'WebP (smallest)',
};

function fillSelect(select: HTMLSelectElement, values: readonly string[], preferred: string, label = (v: string) => v) {
  const keep = values.includes(select.value) ? select.value : preferred;
  select.replaceChildren(...values.map((value) => el('option', { value, textContent: label(value) })));
  select.value = keep;
}

/** The options the chosen model offers; the reference limit; then the price. */
function onModelChange(): void {
  const model = currentModel();
  $('model-description').textContent = model.description;
  fillSelect($('aspect-ratio'), model.aspect_ratios, model.defaults.aspect_ratio);
  fillSelect(
    $('resolution'),
    model.resolutions,
    model.defaults.resolution,
    (r) => `${r} · ${model.prices[r as '1K']} tokens`,
  );
  // Same price and size in every format; jpeg and webp at the default output_compression.
  fillSelect($('output-format'), model.output_formats, 'png', (f) => OUTPUT_FORMAT_LABELS[f] ?? f);
  const prompt = $<HTMLTextAreaElement>('prompt');
  prompt.maxLength = model.prompt_length.max;
  prompt.minLength = model.prompt_length.min;
  const max = model.image_reference_count.max;
  $('reference-limit').textContent = `up to ${max}, PNG, JPEG or WebP`;
  if (references.length > max) {
    references = references.slice(0, max);
    renderReferences();
  }
  onPromptInput();
}

function onPromptInput(): void {
  const model = currentModel();
  const count = codePoints($<HTMLTextAreaElement>('prompt').value);
  const { min, max } = model.prompt_length;
  const output = $('prompt-count');
  output.textContent = `${count} / ${max} code points${count < min ? ` (at least ${min})` : ''}`;
  // Nothing typed yet is not an error; too short or too long is.
  output.classList.toggle('bad', (count > 0 && count < min) || count > max);
  schedulePrice();
}

let priceTimer: ReturnType<typeof setTimeout> | undefined;
let priceRequest = 0;
function schedulePrice(): void {
  clearTimeout(priceTimer);
  // Until the estimate answers, no price of an earlier form stays shown.
  $('price').dataset.state = 'pending';
  priceTimer = setTimeout(() => void showPrice(), 200);
}

/** The price of the form as it stands, from POST /estimates (what a create would debit). */
async function showPrice(): Promise<void> {
  if (!client) return;
  const output = $('price');
  const request = ++priceRequest;
  // A prompt out of the model's bounds is said here, without a request the API would refuse.
  const { min, max } = currentModel().prompt_length;
  const count = codePoints($<HTMLTextAreaElement>('prompt').value);
  if (count < min || count > max) {
    output.textContent = `Price shown once the prompt has ${min} to ${max} code points`;
    output.dataset.state = count === 0 ? 'empty' : 'bad';
    return;
  }
  try {
    const estimate = unwrap(await client.POST('/api/v1/images/estimates', { body: formBody() })).data;
    if (request !== priceRequest) return;
    output.textContent = `Price: ${estimate.cost} tokens for ${estimate.width} × ${estimate.height} px`;
    output.dataset.state = 'ok';
  } catch (error) {
    if (request !== priceRequest) return;
    const { problem } = asProblem(error);
    output.textContent = `No price yet: ${problem.errors?.[0]?.detail ?? problem.detail}`;
    output.dataset.state = 'bad';
  }
}

function renderReferences(): void {
  $('reference-list').replaceChildren(
    ...references.map((media, index) =>
      el(
        'li',
        {},
        el('img', { src: media.preview, alt: `Reference ${index + 1}`, width: media.width, height: media.height }),
        el('code', { className: 'media-id', textContent: media.media_id }),
        el('span', { textContent: ` ${media.width} × ${media.height}` }),
        el('button', {
          type: 'button',
          textContent: 'Remove',
          ariaLabel: `Remove reference ${index + 1}`,
          onclick: () => {
            references.splice(index, 1);
            renderReferences();
            schedulePrice();
          },
        }),
      ),
    ),
  );
}

/** Each file through POST /api/v1/media, up to the model's count of references. */
async function addReferences(files: Iterable<File>): Promise<void> {
  if (!client) return;
  showProblem(undefined);
  for (const file of files) {
    if (references.length >= currentModel().image_reference_count.max) {
      showProblem({
        title: 'Too many references',
        code: 'too_many_references',
        detail: `${currentModel().id} takes up to ${currentModel().image_reference_count.max} reference images.`,
      });
      break;
    }
    try {
      const media = await uploadMedia(client, file, { filename: file.name });
      references.push({ ...media, preview: URL.createObjectURL(file) });
      renderReferences();
    } catch (error) {
      const { problem, status } = asProblem(error);
      showProblem(problem, status);
      break;
    }
  }
  schedulePrice();
}

function statusLine(task: Task): string {
  return `${task.status} · ${task.model} · ${task.cost} tokens · ${task.task_id}`;
}

function humanBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}

/** The generated image(s) at their real pixel size (scaled down only to fit), with a download link. */
function showResult(task: Task): void {
  const result = $('result');
  result.replaceChildren();
  if (task.status === 'FAILED' && task.error) {
    result.append(el('p', { className: 'bad', textContent: `Failed: ${task.error.code}: ${task.error.message}` }));
    return;
  }
  for (const [index, item] of task.generated.entries()) {
    const caption = el(
      'figcaption',
      {},
      `${item.width} × ${item.height} px · ${item.content_type} · ${humanBytes(item.size_bytes)} · `,
      el('a', { href: item.url, download: `${task.task_id}-${index}`, textContent: 'Download' }),
    );
    result.append(
      el(
        'figure',
        {},
        el('img', {
          className: 'generated',
          src: item.url,
          width: item.width,
          height: item.height,
          alt: `Generated image ${index + 1} for “${task.prompt}”`,
        }),
        caption,
      ),
    );
  }
}

function onTaskState(task: Task): void {
  $('task-status').textContent = statusLine(task);
  $('task-events').append(el('li', { textContent: task.status }));
  if (TERMINAL_STATUSES.includes(task.status)) {
    finishTask();
    showResult(task);
    void refreshAccount();
    void refreshHistory(true);
    void refreshUsage();
  }
}

function finishTask(): void {
  running?.source.close();
  running = undefined;
  $<HTMLButtonElement>('cancel').hidden = true;
  $<HTMLButtonElement>('generate').disabled = false;
  document.body.dataset.task = 'idle';
}

/** Follows a task through its signed stream_url with the browser's own EventSource. */
function watch(task: Task): void {
  $('task-section').hidden = false;
  $('task-events').replaceChildren();
  $('result').replaceChildren();
  const source = new EventSource(task.stream_url);
  running = { task, source };
  document.body.dataset.task = 'running';
  $<HTMLButtonElement>('cancel').hidden = false;
  $<HTMLButtonElement>('generate').disabled = true;
  source.addEventListener('task', (event) => onTaskState(JSON.parse((event as MessageEvent<string>).data) as Task));
  source.addEventListener('done', () => source.close());
  source.onerror = () => {
    // EventSource reconnects by itself (with Last-Event-ID); a closed one gets the task once by GET.
    if (source.readyState === EventSource.CLOSED && running?.source === source) void reread(task.task_id);
  };
}

async function reread(taskId: string): Promise<void> {
  if (!client) return;
  try {
    const task = unwrap(
      await client.GET('/api/v1/images/generations/{task_id}', { params: { path: { task_id: taskId } } }),
    ).data;
    if (TERMINAL_STATUSES.includes(task.status)) onTaskState(task);
  } catch (error) {
    const { problem, status } = asProblem(error);
    showProblem(problem, status);
  }
}

async function generate(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  if (!client || running) return;
  showProblem(undefined);
  // The previous task's states and image go at once, before the create is answered.
  $('task-events').replaceChildren();
  $('result').replaceChildren();
  $('task-status').textContent = '';
  $<HTMLButtonElement>('generate').disabled = true;
  try {
    const task = unwrap(
      await client.POST('/api/v1/images/generations', {
        body: formBody(),
        params: { header: { 'idempotency-key': crypto.randomUUID() } },
      }),
    ).data;
    watch(task);
    void refreshAccount();
  } catch (error) {
    const { problem, status } = asProblem(error);
    showProblem(problem, status);
    $<HTMLButtonElement>('generate').disabled = false;
  }
}

async function cancel(): Promise<void> {
  if (!client || !running) return;
  const { task } = running;
  const result = await client.POST('/api/v1/images/generations/{task_id}/cancel', {
    params: { path: { task_id: task.task_id } },
  });
  // The stream reports CANCELED; a refusal (it finished first: 409) is shown.
  if (result.error) showProblem(result.error as Refusal, result.response.status);
}

async function refreshAccount(): Promise<void> {
  if (!client) return;
  try {
    const account = unwrap(await client.GET('/api/v1/account')).data;
    $('balance').textContent = String(account.balance);
    const ledger = unwrap(await client.GET('/api/v1/account/ledger', { params: { query: { limit: LEDGER_ENTRIES } } }));
    fillRows($('ledger'), ledger.data.map(ledgerRow));
  } catch (error) {
    const { problem, status } = asProblem(error);
    showProblem(problem, status);
  }
}

/** The account's last 30 days by day and model (GET /api/v1/usage): tokens charged as a chart, totals, and its keys. */
async function refreshUsage(): Promise<void> {
  if (!client) return;
  const days = lastDays(USAGE_DAYS);
  try {
    const usage = unwrap(
      await client.GET('/api/v1/usage', {
        params: { query: { from: days[0], to: days[days.length - 1], group_by: 'day,model' } },
      }),
    );
    const rows = (usage as { data: UsageRow[] }).data;
    drawUsageChart($('usage-chart'), rows, days, 'tokens_charged');
    $('usage-totals').replaceChildren(
      usageTotalsTable(rows, `Totals per model, ${days[0]} to ${days[days.length - 1]}`),
    );
    const keys = unwrap(await client.GET('/api/v1/keys')).data;
    fillRows($('keys'), keys.map(keyRow));
  } catch (error) {
    const { problem, status } = asProblem(error);
    showProblem(problem, status);
  }
}

function keyRow(key: AccountKey): HTMLTableRowElement {
  const budget = key.token_budget
    ? `${key.budget_spent} of ${key.token_budget.tokens} ${key.token_budget.period ? `a ${key.token_budget.period}` : 'in all'}`
    : `${key.budget_spent} (no budget)`;
  return el(
    'tr',
    {},
    el('td', { textContent: key.name }),
    el('td', {}, el('code', { textContent: key.prefix })),
    el('td', { textContent: key.models?.join(', ') ?? 'every model' }),
    el('td', { textContent: budget }),
    timeCell(key.expires_at, 'never'),
    timeCell(key.last_used_at, 'never'),
  );
}

function ledgerRow(entry: LedgerEntry): HTMLTableRowElement {
  return el(
    'tr',
    {},
    timeCell(entry.created_at),
    el('td', { textContent: entry.kind }),
    el('td', { textContent: `${entry.kind === 'debit' ? '−' : '+'}${entry.amount}` }),
    el('td', { textContent: String(entry.balance_after) }),
  );
}

function historyItem(task: Task): HTMLLIElement {
  const image = task.generated[0];
  const item = el('li', { className: 'history-item' });
  item.dataset.taskId = task.task_id;
  item.dataset.status = task.status;
  if (image)
    item.append(
      el(
        'a',
        { href: image.url, target: '_blank', rel: 'noopener' },
        el('img', { src: image.url, alt: task.prompt, loading: 'lazy', width: image.width, height: image.height }),
      ),
    );
  item.append(
    el('strong', { textContent: task.status }),
    el('span', {
      textContent: ` ${task.model} · ${task.parameters.aspect_ratio} ${task.parameters.resolution} ${task.parameters.output_format}`,
    }),
    el('p', { textContent: task.prompt }),
  );
  return item;
}

/** One page of the account's tasks, newest first; `restart` reads from the first page. */
async function refreshHistory(restart: boolean): Promise<void> {
  if (!client) return;
  const status = $<HTMLSelectElement>('history-status').value as TaskStatus | '';
  if (restart) historyCursor = null;
  try {
    const page = unwrap(
      await client.GET('/api/v1/images/generations', {
        params: {
          query: {
            limit: HISTORY_PAGE,
            ...(status ? { status } : {}),
            ...(historyCursor ? { cursor: historyCursor } : {}),
          },
        },
      }),
    );
    const list = $('history');
    if (restart) list.replaceChildren();
    list.append(...page.data.map(historyItem));
    historyCursor = page.next_cursor;
    $<HTMLButtonElement>('history-more').hidden = page.next_cursor === null;
  } catch (error) {
    const { problem, status: code } = asProblem(error);
    showProblem(problem, code);
  }
}

/** With a key: the models (GET /models is also the key's check), then the form, account and history. */
async function start(key: string): Promise<void> {
  const candidate = createImageGenClient({ baseUrl: location.origin, apiKey: key });
  const state = $('key-state');
  try {
    models = unwrap(await candidate.GET('/api/v1/models')).data;
  } catch (error) {
    const { problem, status } = asProblem(error);
    state.textContent = `The key was refused: ${status ?? ''} ${problem.code}: ${problem.detail}`;
    sessionStorage.removeItem(KEY_STORAGE);
    return;
  }
  client = candidate;
  sessionStorage.setItem(KEY_STORAGE, key);
  state.textContent = 'Key in use for this tab.';
  $<HTMLInputElement>('api-key').value = '';
  $('forget-key').hidden = false;
  fillSelect(
    $('model'),
    models.map((m) => m.id),
    models[0].id,
  );
  onModelChange();
  $('workspace').hidden = false;
  document.body.dataset.ready = 'yes';
  await Promise.all([refreshAccount(), refreshHistory(true), refreshUsage()]);
}

function forget(): void {
  sessionStorage.removeItem(KEY_STORAGE);
  client = undefined;
  finishTask();
  $('workspace').hidden = true;
  $('forget-key').hidden = true;
  $('key-state').textContent = 'Key forgotten.';
  delete document.body.dataset.ready;
}

function wire(): void {
  $('key-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = $<HTMLInputElement>('api-key').value.trim();
    if (key) void start(key);
  });
  $('forget-key').addEventListener('click', forget);
  $('model').addEventListener('change', onModelChange);
  $('prompt').addEventListener('input', onPromptInput);
  $('aspect-ratio').addEventListener('change', schedulePrice);
  $('resolution').addEventListener('change', schedulePrice);
  $('output-format').addEventListener('change', schedulePrice);
  $('generate-form').addEventListener('submit', (event) => void generate(event as SubmitEvent));
  $('cancel').addEventListener('click', () => void cancel());
  $('history-status').addEventListener('change', () => void refreshHistory(true));
  $('history-more').addEventListener('click', () => void refreshHistory(false));
  const files = $<HTMLInputElement>('reference-files');
  files.addEventListener('change', () => {
    void addReferences([...(files.files ?? [])]).then(() => (files.value = ''));
  });
  const zone = $('drop-zone');
  zone.addEventListener('dragover', (event) => {
    event.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (event) => {
    event.preventDefault();
    zone.classList.remove('over');
    void addReferences([...(event.dataTransfer?.files ?? [])]);
  });
  const saved = sessionStorage.getItem(KEY_STORAGE);
  if (saved) void start(saved);
}

wire();
