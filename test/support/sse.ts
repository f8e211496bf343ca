/** One server-sent event as a client reads it. */
export interface SseEvent {
  id: number;
  event: string;
  data: any;
}

const TERMINAL = new Set(['run.completed', 'run.failed', 'run.cancelled']);

/**
 * Reads GET /v1/runs/{id}/events until the stream ends (the server closes it after the
 * run's terminal event), `until` says stop, or the deadline passes (an error).
 */
export async function readRunEvents(
  baseUrl: string,
  key: string,
  runId: string,
  options: { lastEventId?: number; until?: (e: SseEvent) => boolean; timeoutMs?: number } = {},
): Promise<SseEvent[]> {
  const controller = new AbortController();
  const timeoutMs = options.timeoutMs ?? 60_000;
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (options.lastEventId !== undefined) headers['last-event-id'] = String(options.lastEventId);
  const events: SseEvent[] = [];
  try {
    const res = await fetch(`${baseUrl}/v1/runs/${runId}/events`, { headers, signal: controller.signal });
    if (res.status !== 200) throw new Error(`events answered ${res.status}: ${await res.text()}`);
    if (res.headers.get('content-type') !== 'text/event-stream') throw new Error(`unexpected content type ${res.headers.get('content-type')}`);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parse(block);
        if (!event) continue;
        events.push(event);
        if (options.until?.(event)) {
          controller.abort();
          return events;
        }
      }
    }
    return events;
  } catch (err) {
    if (controller.signal.aborted && options.until && events.length > 0 && options.until(events[events.length - 1])) return events;
    if (controller.signal.aborted) throw new Error(`no end of the event stream within ${timeoutMs} ms; got ${events.map((e) => e.event).join(', ')}`);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export function isTerminalEvent(e: SseEvent): boolean {
  return TERMINAL.has(e.event);
}

function parse(block: string): SseEvent | undefined {
  let id: number | undefined;
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    if (line.startsWith('id: ')) id = Number(line.slice(4));
    else if (line.startsWith('event: ')) event = line.slice(7);
    else if (line.startsWith('data: ')) data.push(line.slice(6));
  }
  if (id === undefined) return undefined;
  return { id, event, data: JSON.parse(data.join('\n')) };
}
