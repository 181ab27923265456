import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import type { SSEMessage } from '@fastify/sse';
import { EXAMPLE_TASK_ID } from '../../../schemas/primitives.js';
import { DomainError } from '../../core/errors.js';
import { toTaskResource, type MediaUrlSigner } from '../../presenters/resources.js';
import type { StreamReader, StreamStep, TaskStreams } from '../../services/task-streams.js';
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
  streams: TaskStreams;
  signer: MediaUrlSigner & { verifyStream(taskId: string, expires: number, signature: string, now: Date): boolean };
  now: () => Date;
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
  { streams, signer, now },
) => {
  // At shutdown every open stream ends with a reconnect event.
  app.addHook('preClose', async () => streams.stopAll());

  /** The stream_url's signature, else the Bearer key (auth let the request through without one for signed URLs). */
  const readerOf = (
    query: { expires?: string; signature?: string },
    caller: Caller | null,
    taskId: string,
  ): StreamReader => {
    const at = now();
    if (
      signedUrlExpiry(query, at, (expires, signature) => signer.verifyStream(taskId, expires, signature, at)) !== null
    )
      return { kind: 'signed-url' };
    if (!caller) throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>, or use the stream_url.');
    return { kind: 'key', accountId: caller.accountId, keyId: caller.keyId };
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
      const taskId = canonicalId(request.params.task_id);
      const reader = readerOf(request.query, request.caller as Caller | null, taskId);
      const stream = await streams.open(reader, taskId, request.headers['last-event-id']);
      if (stream === null) return reply.code(204).send();
      const closed = new Promise<void>((resolve) => reply.raw.once('close', resolve));
      void closed.then(() => stream.stop());
      // Proxies must neither buffer nor compress the stream (@fastify/sse sets X-Accel-Buffering: no).
      reply.header('cache-control', 'no-cache, no-transform');
      // At once, even when a resumed stream has nothing to send yet: the client sees it is open.
      reply.sse.sendHeaders(200);
      // writeHead only queues the head until the first write; a resumed stream may write nothing for minutes.
      reply.raw.flushHeaders();
      let retry: number | undefined = STREAM_RETRY_MS;
      try {
        for await (const step of stream.steps()) {
          const message: SSEMessage = { ...toStreamMessage(step, signer, now()), retry };
          retry = undefined;
          if (!(await sendUnlessStalled(reply, message, closed))) return;
        }
      } finally {
        stream.close();
      }
    },
  );
};

/** A stream step as its SSE event: the task resource, `done` with the final status, or `reconnect`. */
function toStreamMessage(step: StreamStep, signer: MediaUrlSigner, now: Date): SSEMessage {
  switch (step.event) {
    case 'task':
      return { id: String(step.step), event: 'task', data: toTaskResource(step.task, signer, now) };
    case 'done':
      return { event: 'done', data: { task_id: step.task.id, status: step.task.status } };
    case 'reconnect':
      return { event: 'reconnect', data: { reason: step.reason } };
  }
}

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
