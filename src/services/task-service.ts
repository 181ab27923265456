import type { GenerationRequest } from '../../schemas/catalog.js';
import { DomainError, notFound } from '../core/errors.js';
import { priceRequest, type PricedRequest } from '../core/pricing.js';
import { createTask, type TaskRecord } from '../core/task.js';
import { newIdAt } from '../ids.js';
import type { Page, Store, TaskListQuery } from '../store/port.js';

export interface TaskServiceOptions {
  store: Store;
  now: () => Date;
  maxActiveTasks: number;
}

/** Task use cases: the steps around the pure core that need the store and the clock. */
export class TaskService {
  constructor(private readonly options: TaskServiceOptions) {}

  estimate(request: GenerationRequest): PricedRequest {
    return priceRequest(request.model, request.parameters);
  }

  async create(accountId: string, request: GenerationRequest): Promise<TaskRecord> {
    const now = this.options.now();
    await this.assertReferencesUsable(accountId, request.image_reference ?? [], now);
    const task = createTask(request, { accountId, now, newId: () => newIdAt(now) });
    await this.options.store.insertTaskWithDebit(task, { maxActiveTasks: this.options.maxActiveTasks });
    return task;
  }

  async get(accountId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.getTask(accountId, taskId);
    if (!task) throw notFound('Task');
    return task;
  }

  list(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    return this.options.store.listTasks(accountId, query);
  }

  /** Every reference must be an unexpired upload of the same account; the first bad one is named. */
  private async assertReferencesUsable(accountId: string, mediaIds: string[], now: Date): Promise<void> {
    if (mediaIds.length === 0) return;
    const usable = await this.options.store.findUsableUploads(accountId, mediaIds, now);
    const badIndex = mediaIds.findIndex((id) => !usable.has(id));
    if (badIndex === -1) return;
    const detail = `image_reference[${badIndex}] does not name an unexpired upload of this account.`;
    throw new DomainError('invalid_media_reference', detail, [
      { pointer: `/image_reference/${badIndex}`, location: 'body', code: 'unknown_media', detail },
    ]);
  }
}
