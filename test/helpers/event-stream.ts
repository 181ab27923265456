import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** An open Server-Sent Events response read as a client would: events in order, comments, the retry hint. */
export interface EventStream {
  status: number;
  headers: Headers;
  /** The next event, or null once the server closed the stream. */
  next(): Promise<EventSourceMessage | null>;
  comments: string[];
  retry: number | null;
  close(): void;
}

/** GET `url` and parse its body as a stream of events (undici's fetch, like a browser's). */
export async function openEventStream(url: string, headers: Record<string, string> = {}): Promise<EventStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const queued: (EventSourceMessage | null)[] = [];
  const waiting: ((event: EventSourceMessage | null) => void)[] = [];
  const deliver = (event: EventSourceMessage | null) => {
    const waiter = waiting.shift();
    if (waiter) waiter(event);
    else queued.push(event);
  };
  const stream: EventStream = {
    status: response.status,
    headers: response.headers,
    comments: [],
    retry: null,
    next: () =>
      queued.length > 0 ? Promise.resolve(queued.shift()!) : new Promise((resolve) => waiting.push(resolve)),
    close: () => abort.abort(),
  };
  const parser = createParser({
    onEvent: deliver,
    onComment: (comment) => stream.comments.push(comment),
    onRetry: (retry) => (stream.retry = retry),
  });
  void (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body ?? []) parser.feed(decoder.decode(chunk, { stream: true }));
    } catch {
      // Closed by the test (abort) or the server: the end of the stream either way.
    }
    deliver(null);
  })();
  return stream;
}
