import type { Readable } from 'node:stream';
import type { GenerationRequest } from '../../schemas/catalog.js';
import type { OpenAiImageRequest } from '../core/openai-images.js';
import { isTerminal, type TaskRecord } from '../core/task.js';
import type { StoredResponse } from '../store/port.js';
import type { GenerationOrder, GenerationSubmission } from './generation-submission.js';
import type { MediaService } from './media-service.js';
import type { TaskService } from './task-service.js';

/**
 * The OpenAI Images face's use case (decision 0025): an OpenAI request becomes n tasks through the
 * one create (GenerationSubmission, admitted and charged together), and the answer waits for them
 * with the tasks' one wait. With an Idempotency-Key the key keeps the task ids, so a retry (the
 * SDKs retry a dropped connection, a timeout, a 5xx) waits for the same tasks instead of making
 * new ones: one charge whatever the number of attempts.
 */
export interface OpenAiImagesServiceOptions {
  submission: GenerationSubmission;
  tasks: TaskService;
  media: MediaService;
  /** How long a request waits for its images (OPENAI_COMPAT_WAIT_SECONDS). */
  waitMs: number;
}

export interface OpenAiImagesCall {
  accountId: string;
  /** The API key of the call (its scope is checked at admission). */
  key?: GenerationOrder['key'];
  request: OpenAiImageRequest;
  /** The Idempotency-Key and the fingerprint of the request it was sent with. */
  idempotency: { key: string; fingerprint: string } | null;
  /** An edit's reference images: each stores one as an upload of the account and returns its media id. */
  referenceUploads?: readonly (() => Promise<string>)[];
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
    const { request } = call;
    const submitted = await this.options.submission.submit({
      accountId: call.accountId,
      ...(call.key && { key: call.key }),
      request: {
        model: request.model.id,
        prompt: request.prompt,
        parameters: {
          aspect_ratio: request.aspectRatio,
          resolution: request.resolution,
          output_format: request.outputFormat,
          ...(request.outputCompression === null ? {} : { output_compression: request.outputCompression }),
          ...(request.seed === null ? {} : { seed: request.seed }),
        },
      } as GenerationRequest,
      count: request.n,
      origin: request.user === null ? {} : { endUserId: request.user },
      idempotency: call.idempotency,
      ...(call.referenceUploads ? { referenceUploads: call.referenceUploads } : {}),
      answerOf: (tasks) => ({
        statusCode: 200,
        headers: { 'content-type': TASK_IDS_CONTENT_TYPE },
        body: Buffer.from(JSON.stringify({ task_ids: tasks.map((task) => task.id) })),
      }),
    });
    const taskIds = submitted.replayed ? taskIdsOf(submitted.response) : submitted.tasks.map((task) => task.id);
    const tasks = await this.options.tasks.waitForTasks(call.accountId, taskIds, {
      waitMs: this.options.waitMs,
      signal: call.signal,
    });
    const replayed = submitted.replayed;
    if (tasks.some((task) => !isTerminal(task.status))) return { outcome: 'waiting', taskIds, replayed };
    return { outcome: 'finished', tasks, replayed };
  }

  /** The bytes of a generated image of the account (for `b64_json`). */
  async imageBytes(accountId: string, mediaId: string): Promise<Buffer> {
    const media = await this.options.media.get(accountId, mediaId);
    const { body } = await this.options.media.openContent(media);
    return readAll(body);
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
