import type { Readable } from 'node:stream';
import type { GenerationRequest } from '../../schemas/catalog.js';
import type { OpenAiImageRequest } from '../core/openai-images.js';
import { isTerminal, type TaskRecord } from '../core/task.js';
import type { StoredResponse } from '../store/port.js';
import { IDEMPOTENCY_LEASE_RENEW_MS, type HeldIdempotencyKey, type IdempotencyService } from './idempotency.js';
import type { MediaService } from './media-service.js';
import type { TaskService } from './task-service.js';

/**
 * The OpenAI Images face's use case (decision 0025): an OpenAI request becomes n tasks, admitted
 * and charged together, and the answer waits for them with the long-poll machinery. With an
 * Idempotency-Key the key is completed in the charge's transaction with the task ids, so a retry
 * (the SDKs retry a dropped connection, a timeout, a 5xx) waits for the same tasks instead of
 * making new ones: one charge whatever the number of attempts.
 */
export interface OpenAiImagesServiceOptions {
  tasks: TaskService;
  media: MediaService;
  idempotency: IdempotencyService;
  /** How long a request waits for its images (OPENAI_COMPAT_WAIT_SECONDS). */
  waitMs: number;
}

export interface OpenAiImagesCall {
  accountId: string;
  request: OpenAiImageRequest;
  /** The Idempotency-Key and the fingerprint of the request it was sent with. */
  idempotency?: { key: string; fingerprint: string };
  /** An edit's reference images: stores them as the account's uploads, returns their media ids. */
  storeReferences?: () => Promise<string[]>;
  /** The client went away: stop waiting (the tasks go on). */
  signal: AbortSignal;
}

export type OpenAiImagesOutcome =
  | { outcome: 'finished'; tasks: TaskRecord[]; replayed: boolean }
  | { outcome: 'waiting'; taskIds: string[]; replayed: boolean };

/** What a completed Idempotency-Key keeps for this face: the ids of the tasks it made. */
const TASK_IDS_CONTENT_TYPE = 'application/vnd.imagegen.task-ids+json';

export class OpenAiImagesService {
  constructor(private readonly options: OpenAiImagesServiceOptions) {}

  get waitSeconds(): number {
    return Math.round(this.options.waitMs / 1000);
  }

  async generate(call: OpenAiImagesCall): Promise<OpenAiImagesOutcome> {
    let held: HeldIdempotencyKey | null = null;
    if (call.idempotency) {
      const claim = await this.options.idempotency.claim(
        call.accountId,
        call.idempotency.key,
        call.idempotency.fingerprint,
      );
      if (claim.outcome === 'replay') return this.wait(call, taskIdsOf(claim.response), true);
      held = claim.held;
    }
    let taskIds: string[];
    try {
      taskIds = await this.admit(call, held);
    } catch (error) {
      // Nothing was charged: the key is free for a retry at once.
      if (held) await this.options.idempotency.release(held);
      throw error;
    }
    return this.wait(call, taskIds, false);
  }

  /** The bytes of a generated image of the account (for `b64_json`). */
  async imageBytes(accountId: string, mediaId: string): Promise<Buffer> {
    const media = await this.options.media.get(accountId, mediaId);
    const { body } = await this.options.media.openContent(media);
    return readAll(body);
  }

  /** n tasks priced, checked and charged in one transaction (the key completed in it too). */
  private async admit(call: OpenAiImagesCall, held: HeldIdempotencyKey | null): Promise<string[]> {
    const { request } = call;
    // An edit's uploads are decoded and stored before the charge, which may take longer than the
    // key's lease: it is renewed meanwhile, as the Idempotency-Key plugin does.
    const references = call.storeReferences ? await this.renewingLease(held, call.storeReferences) : undefined;
    const native = {
      model: request.model.id,
      prompt: request.prompt,
      ...(references ? { image_reference: references } : {}),
      parameters: {
        aspect_ratio: request.aspectRatio,
        resolution: request.resolution,
        output_format: request.outputFormat,
        ...(request.outputCompression === null ? {} : { output_compression: request.outputCompression }),
      },
    } as GenerationRequest;
    const origin = request.user === null ? {} : { endUserId: request.user };
    const tasks: TaskRecord[] = [];
    for (let i = 0; i < request.n; i++) tasks.push(await this.options.tasks.prepare(call.accountId, native, origin));
    const taskIds = tasks.map((task) => task.id);
    const response: StoredResponse = {
      statusCode: 200,
      headers: { 'content-type': TASK_IDS_CONTENT_TYPE },
      body: Buffer.from(JSON.stringify({ task_ids: taskIds })),
    };
    await this.options.tasks.createMany(tasks, held ? { ...held, response } : undefined);
    return taskIds;
  }

  /** Every task once terminal, or the ids when the wait ran out first (one deadline for all). */
  private async wait(call: OpenAiImagesCall, taskIds: string[], replayed: boolean): Promise<OpenAiImagesOutcome> {
    const deadline = Date.now() + this.options.waitMs;
    const tasks: TaskRecord[] = [];
    for (const taskId of taskIds) {
      const remaining = Math.max(0, deadline - Date.now());
      const task = await this.options.tasks.waitForTerminal(call.accountId, taskId, remaining, call.signal);
      if (!isTerminal(task.status)) return { outcome: 'waiting', taskIds, replayed };
      tasks.push(task);
    }
    return { outcome: 'finished', tasks, replayed };
  }

  private async renewingLease<T>(held: HeldIdempotencyKey | null, work: () => Promise<T>): Promise<T> {
    if (!held) return work();
    const renewal = setInterval(() => {
      this.options.idempotency.renew(held).catch(() => {
        // A lost renewal shows at the charge: completing the key fails and nothing is charged.
      });
    }, IDEMPOTENCY_LEASE_RENEW_MS);
    try {
      return await work();
    } finally {
      clearInterval(renewal);
    }
  }
}

function taskIdsOf(response: StoredResponse): string[] {
  if (response.headers['content-type'] !== TASK_IDS_CONTENT_TYPE) {
    // The key was completed by another route: the fingerprint (method and path) rules that out.
    throw new Error('An Idempotency-Key of the OpenAI face holds an answer it did not store.');
  }
  return (JSON.parse(response.body.toString('utf8')) as { task_ids: string[] }).task_ids;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
