import { MAX_EVENT_CHARS, SseParser } from './sse';

describe('SseParser', () => {
  it('yields events split across chunks anywhere, with ids, types and multi-line data', () => {
    const stream = 'id: 1\nevent: run.started\ndata: {"a":1}\n\n: keepalive\n\nid: 2\r\nevent: message.created\r\ndata: line one\r\ndata: line two\r\n\r\n';
    for (let cut = 0; cut <= stream.length; cut++) {
      const parser = new SseParser();
      const events = [...parser.push(stream.slice(0, cut)), ...parser.push(stream.slice(cut))];
      expect(events).toEqual([
        { id: '1', event: 'run.started', data: '{"a":1}' },
        { id: '2', event: 'message.created', data: 'line one\nline two' },
      ]);
    }
  });

  it('keeps the last id for events that carry none, and defaults the type to message', () => {
    const parser = new SseParser();
    expect(parser.push('id: 7\ndata: x\n\ndata: y\n\n')).toEqual([
      { id: '7', event: 'message', data: 'x' },
      { id: '7', event: 'message', data: 'y' },
    ]);
  });

  it('refuses an event that grows past the limit instead of buffering without end', () => {
    const parser = new SseParser();
    expect(() => parser.push(`data: ${'x'.repeat(MAX_EVENT_CHARS + 1)}`)).toThrow(/larger than/);
  });
});
