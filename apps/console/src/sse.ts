/**
 * Server-sent events read with fetch, so the API key travels in a header (EventSource cannot
 * send one), resumed with Last-Event-ID after a dropped connection.
 */

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** The longest event the console accepts; a bigger one means something is wrong upstream. */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024;

/** An incremental parser of the text/event-stream format (comments, multi-line data, CRLF). */
export class SseParser {
  private buffer = '';
  private id: string | null = null;
  private event = '';
  private data: string[] = [];
  private dataChars = 0;

  /** Feeds decoded text; returns the events it completed. */
  push(text: string): SseEvent[] {
    this.buffer += text;
    const events: SseEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      // A lone \r at the very end may be the first half of \r\n: wait for more.
      if (this.buffer[end] === '\r' && end === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      const event = this.line(line);
      if (event) events.push(event);
    }
    if (this.buffer.length + this.dataChars > MAX_EVENT_CHARS) throw new Error(`an event is larger than ${MAX_EVENT_CHARS} characters`);
    return events;
  }

  private line(line: string): SseEvent | null {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = '';
        return null;
      }
      const event = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
      this.event = '';
      this.data = [];
      this.dataChars = 0;
      return event;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.data.push(value);
      this.dataChars += value.length;
    } else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    return null;
  }
}

export interface StreamOptions {
  token: string;
  /** Resume after this event id (the last one already seen). */
  lastEventId?: string | null;
  signal: AbortSignal;
  onEvent: (event: SseEvent) => void;
  /** Says whether the stream is over after this event (then no reconnect). */
  isFinal: (event: SseEvent) => boolean;
  onError?: (message: string | null) => void;
}

/**
 * Reads the stream until a final event or until aborted. A connection that ends early or
 * fails is opened again with Last-Event-ID (after 0.5 s, doubling to 8 s), so no event is
 * missed or repeated. A 4xx answer ends it: retrying would not change it.
 */
export async function followEvents(url: string, options: StreamOptions): Promise<void> {
  let lastId = options.lastEventId ?? null;
  let delay = 500;
  while (!options.signal.aborted) {
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${options.token}`, accept: 'text/event-stream' };
      if (lastId !== null) headers['last-event-id'] = lastId;
      const res = await fetch(url, { headers, signal: options.signal, cache: 'no-store' });
      if (res.status >= 400 && res.status < 500) {
        options.onError?.(`the event stream answered ${res.status}`);
        return;
      }
      if (!res.ok || !res.body) throw new Error(`the event stream answered ${res.status}`);
      options.onError?.(null);
      const parser = new SseParser();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const event of parser.push(value)) {
          if (event.id !== null) lastId = event.id;
          options.onEvent(event);
          if (options.isFinal(event)) {
            await reader.cancel();
            return;
          }
          delay = 500;
        }
      }
    } catch (err) {
      if (options.signal.aborted) return;
      options.onError?.(`event stream interrupted (${err instanceof Error ? err.message : String(err)}); reconnecting`);
    }
    await sleep(delay, options.signal);
    delay = Math.min(delay * 2, 8_000);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
