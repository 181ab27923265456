import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import type { SSEMessage } from '@fastify/sse';
import { EXAMPLE_TASK_ID } from '../../../schemas/primitives.js';
import { DomainError } from '../../core/errors.js';
import { isTerminal, type TaskRecord } from '../../core/task.js';
import { nextStreamEvent, parseLastEventId, taskStepOf } from '../../core/task-stream.js';
import { toTaskResource, type MediaUrlSigner } from '../../presenters/resources.js';
import type { ConnectionSlots } from '../../services/connection-slots.js';
import type { TaskService } from '../../services/task-service.js';
import type { Caller } from '../plugins/auth.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  apiEmpty,
  apiHeaders,
  canonicalId,
  problemResponses,
  uuidParam,
} from '../route-schemas.js';
import { SignedUrlQueryFields, signedUrlExpiry } from '../signed-url.js';

export interface TaskEventRoutesOptions {
  tasks: TaskService;
  signer: MediaUrlSigner & { verifyStream(taskId: string, expires: number, signature: string, now: Date): boolean };
  now: () => Date;
  /** Open streams per key (Bearer) or per account (signed URL); see SSE_MAX_STREAMS_PER_KEY. */
  streamSlots: ConnectionSlots;
  /** A stream ends by the task's deadline (TASK_DEADLINE_MS after creation) whatever the task does. */
  taskDeadlineMs: number;
}

/** How long a browser's EventSource waits before it reconnects after the stream ended early. */
export const STREAM_RETRY_MS = 2_000;
/** Bytes a reader may leave unread before its stream is dropped: a few events, never a growing queue. */
const STALLED_READER_BYTES = 64 * 1024;

const TaskIdParams = uuidParam('task_id', 'The task id returned at creation (either case).', EXAMPLE_TASK_ID);

const StreamQuery = Type.Object(SignedUrlQueryFields, { additionalProperties: false });

const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      maxLength: 64,
      pattern: '^[\\x20-\\x7e]*$',
      description:
        'The `id` of the last event received (a browser sends it when it reconnects): only later changes are sent.',
    }),
  ),
});

const EVENTS_DESCRIPTION = [
  'Server-Sent Events. Each event has a type (`event:`) and a JSON `data:` line:',
  '`task` — the task resource exactly as `GET /api/v1/images/generations/{task_id}` returns it in `data`',
  "(schema `Task`), sent on connect and then once per change; its `id:` orders the task's changes.",
  '`done` — `{"task_id", "status"}` after the terminal `task` event; the server then closes the stream.',
  '`reconnect` — `{"reason": "shutdown" | "deadline"}`: this server ends the stream; reconnect (with',
  '`Last-Event-ID`) and another process answers. Comment lines (`: heartbeat`) keep the connection open.',
].join(' ');

const EVENT_STREAM_EXAMPLE = [
  'retry: 2000',
  '',
  'id: 1',
  'event: task',
  `data: {"task_id":"${EXAMPLE_TASK_ID}","status":"CREATED",…}`,
  '',
  'id: 3',
  'event: task',
  `data: {"task_id":"${EXAMPLE_TASK_ID}","status":"IN_PROGRESS",…}`,
  '',
  'id: 5',
  'event: task',
  `data: {"task_id":"${EXAMPLE_TASK_ID}","status":"COMPLETED",…}`,
  '',
  'event: done',
  `data: {"task_id":"${EXAMPLE_TASK_ID}","status":"COMPLETED"}`,
  '',
].join('\n');

/**
 * GET /images/generations/{task_id}/events: the task now, each change of status, `done` at the
 * end (docs/design.md §3.4). Authorised by the Bearer key or by the signature of the task's `stream_url`.
 * Streams wake on the long-poll's signals and end at the task's deadline, when the reader stops
 * reading, or, with a `reconnect` event, when the server shuts down.
 */
export const taskEventRoutes: FastifyPluginAsyncTypebox<TaskEventRoutesOptions> = async (
  app,
  { tasks, signer, now, streamSlots, taskDeadlineMs },
) => {
  // Each open stream's stop; at shutdown every one is stopped (a reconnect event, then the end).
  const open = new Set<AbortController>();
  let shuttingDown = false;
  app.addHook('preClose', async () => {
    shuttingDown = true;
    for (const stream of open) stream.abort();
  });

  /**
   * Who reads the stream: the signature of the task's stream_url (any account's task, counted
   * against that account) or the Bearer key (the key's account's task, counted against the key).
   */
  const readerOf = async (
    query: { expires?: string; signature?: string },
    caller: Caller | null,
    taskId: string,
    at: Date,
  ): Promise<{ owner: string | null; task: TaskRecord; slotKey: string }> => {
    const signed = signedUrlExpiry(query, at, (expires, signature) =>
      signer.verifyStream(taskId, expires, signature, at),
    );
    if (signed !== null) {
      const task = await tasks.getBySignedUrl(taskId);
      return { owner: null, task, slotKey: `account:${task.accountId}` };
    }
    // Auth let this route through without a key so that signed URLs work; without a signature the key is required.
    if (!caller) throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>, or use the stream_url.');
    return { owner: caller.accountId, task: await tasks.get(caller.accountId, taskId), slotKey: `key:${caller.keyId}` };
  };

  app.get(
    '/images/generations/:task_id/events',
    {
      sse: { kind: 'manual' },
      config: { auth: 'bearer-or-signature' },
      schema: {
        operationId: 'streamGenerationEvents',
        tags: ['generations'],
        summary: "Stream a task's changes (Server-Sent Events)",
        description:
          "With the Bearer key, or without any key through the task's `stream_url` (a browser's `EventSource`). " +
          `At most SSE_MAX_STREAMS_PER_KEY streams per key are open at once (429 \`too_many_streams\`). ${EVENTS_DESCRIPTION}`,
        security: [...BEARER_SECURITY, {}],
        params: TaskIdParams,
        querystring: StreamQuery,
        headers: StreamHeaders,
        response: {
          200: {
            description: 'The event stream; never compressed or cached.',
            headers: apiHeaders(),
            content: {
              'text/event-stream': {
                schema: {
                  type: 'string',
                  // Lines of `field: value` (id, event, data, retry), `: comment`, or blank.
                  pattern: '^(((id|event|data|retry)?:[^\\n]*)?\\n)*$',
                  maxLength: 2_147_483_647,
                  description: EVENTS_DESCRIPTION,
                },
                example: EVENT_STREAM_EXAMPLE,
              },
            },
          },
          204: apiEmpty(
            '`Last-Event-ID` names the terminal event already: nothing is left to send (an EventSource stops reconnecting).',
          ),
          ...problemResponses([...AUTHENTICATED_CODES, 'not_found', 'too_many_streams']),
        },
      },
    },
    async (request, reply) => {
      const at = now();
      const taskId = canonicalId(request.params.task_id);
      const {
        owner,
        task: found,
        slotKey,
      } = await readerOf(request.query, request.caller as Caller | null, taskId, at);
      let task = found;

      let lastSeen = parseLastEventId(request.headers['last-event-id']);
      if (nextStreamEvent(task, lastSeen) === 'done') return reply.code(204).send();
      const slot = streamSlots.acquire(slotKey);
      if ('refused' in slot)
        throw new DomainError(
          'too_many_streams',
          'As many event streams are open as this API key (or, through stream URLs, its account) may hold; close one.',
        );

      const stop = new AbortController();
      open.add(stop);
      const closed = new Promise<void>((resolve) => reply.raw.once('close', resolve));
      void closed.then(() => stop.abort());
      // Proxies must neither buffer nor compress the stream (@fastify/sse sets X-Accel-Buffering: no).
      reply.header('cache-control', 'no-cache, no-transform');
      // At once, even when a resumed stream has nothing to send yet: the client sees it is open.
      reply.sse.sendHeaders(200);
      // writeHead only queues the head until the first write; a resumed stream may write nothing for minutes.
      reply.raw.flushHeaders();
      const endsAt = task.createdAt.getTime() + taskDeadlineMs;
      let retryHint: number | undefined = STREAM_RETRY_MS;
      const send = (message: SSEMessage) => {
        message.retry = retryHint;
        retryHint = undefined;
        return sendUnlessStalled(reply, message, closed);
      };
      try {
        for (;;) {
          const next = nextStreamEvent(task, lastSeen);
          if (next !== 'wait') {
            if (next === 'task') {
              lastSeen = taskStepOf(task);
              const data = toTaskResource(task, signer, now());
              if (!(await send({ id: String(lastSeen), event: 'task', data }))) return;
            }
            if (isTerminal(task.status)) {
              await send({ event: 'done', data: { task_id: task.id, status: task.status } });
              return;
            }
          }
          const left = endsAt - Date.now();
          if (stop.signal.aborted || left <= 0) {
            await send({ event: 'reconnect', data: { reason: shuttingDown ? 'shutdown' : 'deadline' } });
            return;
          }
          task = await tasks.waitForNextStep(owner, taskId, lastSeen ?? -1, left, stop.signal);
        }
      } finally {
        open.delete(stop);
        slot.release();
      }
    },
  );
};

/**
 * Sends one event, or drops the connection of a reader that has left more than a few events
 * unread (the socket is not being drained): false when the stream is over either way.
 */
async function sendUnlessStalled(reply: FastifyReply, message: SSEMessage, closed: Promise<void>): Promise<boolean> {
  if (!reply.sse.isConnected) return false;
  if (reply.raw.writableLength > STALLED_READER_BYTES) {
    reply.raw.destroy();
    return false;
  }
  // @fastify/sse waits for 'drain' when the socket buffer is full, and a reader that went away
  // never drains it: the close ends the wait too.
  await Promise.race([reply.sse.send(message), closed]);
  return reply.sse.isConnected;
}
