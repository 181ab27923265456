import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';

const TERMINAL = ['COMPLETED', 'FAILED', 'CANCELED'];

/**
 * Creates a task through the API and long-polls it until it is terminal (at most 10 waits of
 * 30 s): the task as the API last answered it. Asserts the create's 202.
 */
export async function createAndAwait(
  t: Test,
  h: { app: FastifyInstance; auth: { authorization: string } },
  body: object,
) {
  const created = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: h.auth,
    payload: body,
  });
  t.equal(created.statusCode, 202, 'accepted');
  const taskId = created.json().data.task_id;
  let task = created.json().data;
  for (let polls = 0; polls < 10 && !TERMINAL.includes(task.status); polls++) {
    task = (await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=30`, headers: h.auth })).json().data;
  }
  return task;
}
