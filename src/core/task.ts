import type { GenerationRequest } from '../../schemas/catalog.js';
import { DomainError } from './errors.js';
import { priceRequest, type EffectiveParameters } from './pricing.js';

export type TaskStatus = 'CREATED' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELED';

export interface GeneratedMediaRef {
  media_id: string;
  content_type: string;
  width: number;
  height: number;
  size_bytes: number;
  /** Kept only when the model's image had another size and was resized and cropped to the catalog's. */
  resized_from?: { width: number; height: number };
}

/** A generated image as the task lists it, from what the worker stored. */
export function generatedMediaRef(media: {
  id: string;
  contentType: string;
  width: number;
  height: number;
  sizeBytes: number;
  resizedFrom?: { width: number; height: number } | null;
}): GeneratedMediaRef {
  const ref: GeneratedMediaRef = {
    media_id: media.id,
    content_type: media.contentType,
    width: media.width,
    height: media.height,
    size_bytes: media.sizeBytes,
  };
  if (media.resizedFrom) ref.resized_from = { width: media.resizedFrom.width, height: media.resizedFrom.height };
  return ref;
}

/**
 * The task's `generated` list once one of its images is gone (deleted or expired): the image leaves
 * the list rather than stay there with a URL that 404s. null when the list does not hold it.
 */
export function withoutGeneratedMedia(generated: GeneratedMediaRef[], mediaId: string): GeneratedMediaRef[] | null {
  const kept = generated.filter((ref) => ref.media_id !== mediaId);
  return kept.length === generated.length ? null : kept;
}

export interface TaskRecord {
  id: string;
  accountId: string;
  status: TaskStatus;
  model: string;
  prompt: string;
  imageReference: string[];
  parameters: EffectiveParameters;
  width: number;
  height: number;
  cost: number;
  webhookUrl: string | null;
  /**
   * The end user of the account's own product the task was made for (the OpenAI face's `user`),
   * at most END_USER_ID_MAX_LENGTH characters; null when not said. Kept for the providers' safety
   * identifier, not shown by the native API.
   */
  endUserId: string | null;
  /** The API key the task was created with (usage and key budgets count by it); null without one. */
  keyId: string | null;
  generated: GeneratedMediaRef[];
  error: { code: string; message: string } | null;
  /** Claims made so far; the fencing token of the current one. */
  attempt: number;
  /**
   * Claims that ended without spending one of the task's attempts: the provider or our storage had
   * no capacity for it (docs/design.md §3.5). attempt − deferredAttempts is what TASK_MAX_ATTEMPTS bounds.
   */
  deferredAttempts: number;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

export interface TaskCreationContext {
  accountId: string;
  now: Date;
  newId: () => string;
  /** See TaskRecord.endUserId; validated by the caller (the face that reads it). */
  endUserId?: string;
  /**
   * The seed this task is made with (the request's, or one drawn for it, and seedAt of either for
   * the i-th task of several); absent = the request's, or none (null).
   */
  seed?: number;
  /** The API key of the create. */
  keyId?: string;
}

/** The longest end-user id a task keeps (OpenAI's `user` has no documented bound; 256 is generous). */
export const END_USER_ID_MAX_LENGTH = 256;

/**
 * The media ids a request references, in their canonical lowercase spelling: UUIDs are
 * case-insensitive (RFC 9562), and ids are stored and compared lowercase.
 */
export function imageReferencesOf(request: GenerationRequest): string[] {
  return (request.image_reference ?? []).map((id) => id.toLowerCase());
}

/** Turns a schema-valid request into the task to store: defaults applied, priced, sized. */
export function createTask(request: GenerationRequest, context: TaskCreationContext): TaskRecord {
  // The face that reads an end-user id refuses a longer one with its own error; this is the bound the stores rely on.
  if (context.endUserId !== undefined && [...context.endUserId].length > END_USER_ID_MAX_LENGTH) {
    throw new RangeError(`An end-user id is at most ${END_USER_ID_MAX_LENGTH} characters.`);
  }
  const priced = priceRequest(request.model, request.parameters);
  return {
    id: context.newId(),
    accountId: context.accountId,
    status: 'CREATED',
    model: priced.model.id,
    prompt: request.prompt,
    imageReference: imageReferencesOf(request),
    parameters: { ...priced.parameters, seed: context.seed ?? priced.parameters.seed },
    width: priced.width,
    height: priced.height,
    cost: priced.cost,
    webhookUrl: request.webhook_url ?? null,
    endUserId: context.endUserId ?? null,
    keyId: context.keyId ?? null,
    generated: [],
    error: null,
    attempt: 0,
    deferredAttempts: 0,
    createdAt: context.now,
    startedAt: null,
    completedAt: null,
  };
}

/**
 * The refusal of a task whose image_reference[index] does not name an unexpired upload of the
 * task's account. The store checks the references in the transaction that creates the task.
 */
export function invalidMediaReference(index: number): DomainError {
  const detail = `image_reference[${index}] does not name an unexpired upload of this account.`;
  return new DomainError('invalid_media_reference', detail, [
    { pointer: `/image_reference/${index}`, location: 'body', code: 'unknown_media', detail },
  ]);
}

export const TERMINAL_STATUSES: readonly TaskStatus[] = ['COMPLETED', 'FAILED', 'CANCELED'];

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export type TaskEvent = 'claim' | 'complete' | 'fail' | 'cancel' | 'release';

/** docs/design.md §3.5: every allowed move; anything else is a conflict. */
const TRANSITIONS: Record<TaskStatus, Partial<Record<TaskEvent, TaskStatus>>> = {
  CREATED: { claim: 'IN_PROGRESS', cancel: 'CANCELED', fail: 'FAILED' },
  IN_PROGRESS: { complete: 'COMPLETED', fail: 'FAILED', cancel: 'CANCELED', release: 'CREATED' },
  COMPLETED: {},
  FAILED: {},
  CANCELED: {},
};

export function nextStatus(current: TaskStatus, event: TaskEvent): TaskStatus {
  const next = TRANSITIONS[current][event];
  if (!next) throw new DomainError('invalid_state', `A ${current} task cannot be ${pastTense(event)}.`);
  return next;
}

export function canTransition(current: TaskStatus, event: TaskEvent): boolean {
  return TRANSITIONS[current][event] !== undefined;
}

/** Statuses from which `event` is allowed; stores use it to guard their conditional updates. */
export function statusesAllowing(event: TaskEvent): TaskStatus[] {
  return (Object.keys(TRANSITIONS) as TaskStatus[]).filter((s) => canTransition(s, event));
}

/** Whether moving into `status` gives the cost back (docs/design.md §3.8: FAILED and CANCELED refund). */
export function refundsOnEntry(status: TaskStatus): boolean {
  return status === 'FAILED' || status === 'CANCELED';
}

function pastTense(event: TaskEvent): string {
  return { claim: 'claimed', complete: 'completed', fail: 'failed', cancel: 'canceled', release: 'released' }[event];
}
