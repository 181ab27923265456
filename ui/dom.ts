/**
 * What the Playground and the console (decisions 0020, 0037) both do with the DOM: find an element,
 * make one with properties (textContent everywhere: no HTML is ever built from API data), and turn
 * a refused request into the API's problem as a page shows it.
 */
import { ImageGenApiError, type Problem } from '../clients/typescript/index.js';

export const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

export const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<HTMLElementTagNameMap[K]> = {},
  ...children: (Node | string)[]
) => {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
};

/** A refusal as shown: the API's problem, or one the page makes (a network failure, too many files). */
export type Refusal = Pick<Problem, 'title' | 'detail' | 'errors'> & { code: string; status?: number };

export function asProblem(error: unknown): { problem: Refusal; status?: number } {
  if (error instanceof ImageGenApiError) return { problem: error.problem, status: error.status };
  const detail = error instanceof Error ? error.message : String(error);
  return { problem: { title: 'Request failed', code: 'network_error', detail } };
}

/** The problem+json of a refused request in `box`, with its status, stable code and detail; none hides the box. */
export function showProblem(box: HTMLElement, problem: Refusal | undefined, status?: number): void {
  box.replaceChildren();
  if (!problem) {
    box.hidden = true;
    return;
  }
  const shownStatus = status ?? problem.status;
  box.append(
    el('strong', { textContent: `${shownStatus ? `${shownStatus} ` : ''}${problem.title}: ` }),
    el('code', { className: 'problem-code', textContent: problem.code }),
    el('p', { className: 'problem-detail', textContent: problem.detail }),
  );
  for (const error of problem.errors ?? []) box.append(el('p', { textContent: `${error.pointer}: ${error.detail}` }));
  box.hidden = false;
}

/** A table's body rows replaced by `rows` (or, with `append`, added after them). */
export function fillRows(table: HTMLTableElement, rows: HTMLTableRowElement[], append = false): void {
  const body = table.tBodies[0] ?? table.appendChild(document.createElement('tbody'));
  if (append) body.append(...rows);
  else body.replaceChildren(...rows);
}

/** A timestamp as a <time>: machine-readable, shown in the reader's locale. */
export function timeCell(iso: string | null, empty = '—'): HTMLTableCellElement {
  if (!iso) return el('td', { textContent: empty });
  return el('td', {}, el('time', { dateTime: iso, textContent: new Date(iso).toLocaleString() }));
}
