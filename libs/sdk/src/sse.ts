/** One server-sent event as it came: `id:`, `event:` and the joined `data:` lines. */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** Longest event the parser keeps (a bigger one is a broken or hostile server). */
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/**
 * Reads a text/event-stream body message by message (the WHATWG rules: lines end with LF,
 * CR or CRLF; a blank line ends a message; `:` lines are comments, such as keepalives).
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let message: { id?: string; event?: string; data: string[] } = { data: [] };
  let size = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return; // a message without its blank line is incomplete: dropped, as browsers do
      buffer += decoder.decode(value, { stream: true });
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        // A lone CR at the end may be the first half of CRLF: wait for more.
        if (!match || (match[0] === '\r' && match.index === buffer.length - 1)) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === '') {
          if (message.data.length > 0 || message.id !== undefined) {
            yield { id: message.id, event: message.event ?? 'message', data: message.data.join('\n') };
          }
          message = { data: [] };
          size = 0;
          continue;
        }
        size += line.length;
        if (size > MAX_EVENT_CHARS) throw new Error(`an event of the stream is longer than ${MAX_EVENT_CHARS} characters`);
        applyField(message, line);
      }
      if (buffer.length > MAX_EVENT_CHARS) throw new Error(`a line of the stream is longer than ${MAX_EVENT_CHARS} characters`);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function applyField(message: { id?: string; event?: string; data: string[] }, line: string): void {
  if (line.startsWith(':')) return;
  const colon = line.indexOf(':');
  const field = colon < 0 ? line : line.slice(0, colon);
  let value = colon < 0 ? '' : line.slice(colon + 1);
  if (value.startsWith(' ')) value = value.slice(1);
  if (field === 'data') message.data.push(value);
  else if (field === 'event') message.event = value;
  else if (field === 'id' && !value.includes('\0')) message.id = value;
}
