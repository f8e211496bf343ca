import { readSse, SseMessage } from './sse';

function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function all(stream: ReadableStream<Uint8Array>): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const message of readSse(stream)) out.push(message);
  return out;
}

describe('readSse', () => {
  it('reads messages split anywhere across chunks, with comments and every line ending', async () => {
    const messages = await all(streamOf('id: 1\nevent: run.qu', 'eued\ndata: {"a":', '1}\n\n: keepalive\n\nid: 2\r\nevent: x\r', '\ndata: one\r\ndata: two\r\n\r\n'));
    expect(messages).toEqual([
      { id: '1', event: 'run.queued', data: '{"a":1}' },
      { id: '2', event: 'x', data: 'one\ntwo' },
    ]);
  });

  it('drops a message cut before its blank line (the connection broke mid-event)', async () => {
    expect(await all(streamOf('id: 1\nevent: a\ndata: {}\n\nid: 2\nevent: b\ndata: {"half'))).toEqual([{ id: '1', event: 'a', data: '{}' }]);
  });

  it('splits multi-byte characters across chunks correctly', async () => {
    const bytes = new TextEncoder().encode('id: 3\ndata: "héllo ✓"\n\n');
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const b of bytes) controller.enqueue(new Uint8Array([b]));
        controller.close();
      },
    });
    expect(await all(stream)).toEqual([{ id: '3', event: 'message', data: '"héllo ✓"' }]);
  });
});
