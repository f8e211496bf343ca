import { McpStdioEnd, McpStdioReadReply, McpStdioStartReply, McpStdioStopReply, McpStdioWriteReply, StdioCommand } from '@app/contracts';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { SandboxStdioPort, StdioTarget } from './sandbox-stdio.client';
import { SandboxStdioTransport } from './sandbox-stdio-transport';

/** A sandbox process in memory: reads wait until the test hands out lines or an end. */
class FakePort implements SandboxStdioPort {
  readonly writes: string[] = [];
  stops = 0;
  writeReply: McpStdioWriteReply = { ok: true, executor_id: 'exec-1', accepted_bytes: 1 };
  private seq = 0;
  private waiting?: (reply: McpStdioReadReply) => void;
  private releaseWrite?: () => void;
  holdWrites = false;

  executorOf(): Promise<string | null> {
    return Promise.resolve(null);
  }
  start(_t: StdioTarget, _e: string | null, _c: StdioCommand): Promise<McpStdioStartReply> {
    return Promise.resolve({ ok: true, executor_id: 'exec-1', handle: 'mcp-1', pid: 42 });
  }
  async write(_t: StdioTarget, _e: string, _h: string, data: string): Promise<McpStdioWriteReply> {
    this.writes.push(data);
    if (this.holdWrites) await new Promise<void>((resolve) => (this.releaseWrite = resolve));
    return this.writeReply;
  }
  read(): Promise<McpStdioReadReply> {
    return new Promise((resolve) => (this.waiting = resolve));
  }
  stop(): Promise<McpStdioStopReply> {
    this.stops++;
    return Promise.resolve({ ok: true, executor_id: 'exec-1', stderr: '' });
  }

  async emit(lines: string[], exited: McpStdioEnd | null = null): Promise<void> {
    await until(() => this.waiting !== undefined);
    const answer = this.waiting as (reply: McpStdioReadReply) => void;
    this.waiting = undefined;
    this.seq += lines.length;
    answer({ ok: true, executor_id: 'exec-1', lines, last_seq: this.seq, exited });
  }

  release(): void {
    this.holdWrites = false;
    this.releaseWrite?.();
  }
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!condition()) throw new Error('condition never held');
}

const request = (id: number): JSONRPCMessage => ({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });

describe('SandboxStdioTransport', () => {
  let port: FakePort;
  let transport: SandboxStdioTransport;
  let received: JSONRPCMessage[];
  let errors: Error[];
  let closed: number;

  beforeEach(async () => {
    port = new FakePort();
    transport = new SandboxStdioTransport(port, { tenantId: 't', sessionId: 's' }, { command: 'node' });
    received = [];
    errors = [];
    closed = 0;
    transport.onmessage = (m) => received.push(m);
    transport.onerror = (e) => errors.push(e);
    transport.onclose = () => closed++;
    await transport.start();
  });

  it('delivers each stdout line as a message, in order', async () => {
    await port.emit(['{"jsonrpc":"2.0","id":1,"result":{}}', '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}']);
    await until(() => received.length === 2);
    expect(received).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'notifications/tools/list_changed' },
    ]);
    expect(transport.executorId).toBe('exec-1');
  });

  it('writes one message at a time, and what queued meanwhile goes in the next write', async () => {
    port.holdWrites = true;
    const first = transport.send(request(1));
    await until(() => port.writes.length === 1);
    const rest = [transport.send(request(2)), transport.send(request(3))];
    port.release();
    await Promise.all([first, ...rest]);
    expect(port.writes).toEqual([`${JSON.stringify(request(1))}\n`, `${JSON.stringify(request(2))}\n${JSON.stringify(request(3))}\n`]);
  });

  it('answers the requests still waiting with the end and its stderr, then closes, when the server exits', async () => {
    await transport.send(request(7));
    await transport.send(request(8));
    await port.emit(['{"jsonrpc":"2.0","id":8,"result":{}}'], { exit_code: 2, reason: 'the process exited with code 2', stderr: 'bad config\n' });
    await until(() => closed === 1);
    const failure = received.find((m) => 'id' in m && m.id === 7) as { error: { code: number; message: string } };
    expect(failure.error.code).toBe(-32000);
    expect(failure.error.message).toBe('the MCP server in the sandbox ended: the process exited with code 2; its stderr: bad config');
    // The request that was answered is not failed again.
    expect(received.filter((m) => 'id' in m && m.id === 8)).toHaveLength(1);
    expect(errors.map((e) => e.message)).toEqual([failure.error.message]);
    // It ended by itself: nothing to stop.
    expect(port.stops).toBe(0);
    // A message sent afterwards learns why too.
    await expect(transport.send(request(9))).rejects.toThrow(failure.error.message);
  });

  it('leaves the report to the read when a write finds the server ended', async () => {
    port.writeReply = { ok: false, executor_id: 'exec-1', error: { code: 'ended', message: 'the MCP server process has ended' } };
    await transport.send(request(1));
    expect(closed).toBe(0);
    await port.emit([], { exit_code: 1, reason: 'the process exited with code 1', stderr: 'boom' });
    await until(() => closed === 1);
    expect(received).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'the MCP server in the sandbox ended: the process exited with code 1; its stderr: boom' } }]);
  });

  it('fails the connection when a write cannot reach the sandbox, and stops the process', async () => {
    port.writeReply = { ok: false, executor_id: 'exec-1', error: { code: 'sandbox_failed', message: 'the sandbox died' } };
    await expect(transport.send(request(1))).rejects.toThrow('writing to the MCP server failed (sandbox_failed): the sandbox died');
    await until(() => closed === 1);
    expect(received).toEqual([{ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'writing to the MCP server failed (sandbox_failed): the sandbox died' } }]);
    expect(port.stops).toBe(1);
  });

  it('reports a line that is not JSON-RPC and goes on', async () => {
    await port.emit(['starting up...', '{"jsonrpc":"2.0","id":1,"result":{}}']);
    await until(() => received.length === 1);
    expect(errors.map((e) => e.message)).toEqual(['the MCP server wrote a line that is not a JSON-RPC message: starting up...']);
    expect(closed).toBe(0);
  });

  it('stops the process and closes once on close()', async () => {
    await transport.close();
    await transport.close();
    expect(port.stops).toBe(1);
    expect(closed).toBe(1);
  });
});
