import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { EgressGuard, NO_DOMAIN_RULES } from '@app/egress';
import { McpConnections, McpHealthReport, McpLimits, McpLink, McpTarget, MCP_LIMITS } from './mcp-connections';
import { McpConnector } from './mcp-connector';
import { McpStdioContext, McpStdioSpec, McpStdioTransportFactory } from './mcp-transports';

/** Two transports joined back to back, as a stdio pipe would join client and server. */
class PipeTransport implements Transport {
  other?: PipeTransport;
  closed = false;
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  static pair(): [PipeTransport, PipeTransport] {
    const a = new PipeTransport();
    const b = new PipeTransport();
    a.other = b;
    b.other = a;
    return [a, b];
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the pipe is closed'));
    queueMicrotask(() => this.other?.onmessage?.(message));
    return Promise.resolve();
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.onclose?.();
    return this.other?.close() ?? Promise.resolve();
  }
}

function fixtureServer(): McpServer {
  const server = new McpServer({ name: 'fixture', version: '1.0.0' });
  server.registerTool('ping', { description: 'Answers pong.', annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: 'pong' }] }));
  return server;
}

async function linkTo(server: McpServer): Promise<McpLink> {
  const [clientSide, serverSide] = PipeTransport.pair();
  await server.connect(serverSide);
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(clientSide);
  return { client, close: () => client.close() };
}

const limits: McpLimits = { ...MCP_LIMITS, backoffMs: 1_000, maxBackoffMs: 8_000, parkAfterFailures: 3, parkMs: 60_000, listFreshMs: 30_000 };

describe('McpConnections', () => {
  let now = 1_000_000;
  const clock = () => now;
  const health: McpHealthReport[] = [];
  beforeEach(() => {
    now = 1_000_000;
    health.length = 0;
  });

  function target(connect: McpTarget['connect'], version = 1): McpTarget {
    return { key: 't:srv', version, connect, onHealth: (h) => health.push(h) };
  }

  it('answers listings from the cache while fresh, and asks again once list_changed arrives', async () => {
    const server = fixtureServer();
    let connects = 0;
    const t = target(() => {
      connects++;
      return linkTo(server);
    });
    const connections = new McpConnections(limits, clock);
    const first = await connections.tools(t);
    expect(first.ok && first.tools.map((x) => x.name)).toEqual(['ping']);

    server.registerTool('later', { description: 'Added later.' }, () => ({ content: [] }));
    // registerTool sent notifications/tools/list_changed; the pipe delivers it on a microtask.
    await new Promise((resolve) => setImmediate(resolve));
    const second = await connections.tools(t);
    expect(second.ok && second.tools.map((x) => x.name).sort()).toEqual(['later', 'ping']);
    expect(connects).toBe(1);
    await connections.closeAll();
  });

  it('backs off after a failure, doubling, then parks the server and probes it again later', async () => {
    let attempts = 0;
    const t = target(() => {
      attempts++;
      return Promise.reject(new Error('connection refused'));
    });
    const connections = new McpConnections(limits, clock);

    expect(await connections.tools(t)).toEqual({ ok: false, error: 'connection refused' });
    // Within the backoff, the server is not tried.
    expect(await connections.tools(t)).toEqual({ ok: false, error: 'connection refused (retrying in 1 s)' });
    expect(attempts).toBe(1);

    now += 1_000;
    await connections.tools(t);
    expect(attempts).toBe(2);
    now += 1_999;
    await connections.tools(t);
    expect(attempts).toBe(2);
    now += 1;
    const parked = await connections.tools(t);
    expect(attempts).toBe(3);
    expect(parked.ok).toBe(false);
    expect(health.at(-1)).toMatchObject({ ok: false, parked: true });

    now += 59_999;
    expect(await connections.tools(t)).toMatchObject({ ok: false, error: expect.stringContaining('parked after 3 failures') });
    expect(attempts).toBe(3);
    now += 1;
    await connections.tools(t);
    expect(attempts).toBe(4);
  });

  it('recovers when a probe succeeds, and reports it healthy', async () => {
    let failing = true;
    const server = fixtureServer();
    const t = target(() => (failing ? Promise.reject(new Error('down')) : linkTo(server)));
    const connections = new McpConnections(limits, clock);
    await connections.tools(t);
    failing = false;
    now += 1_000;
    expect((await connections.tools(t)).ok).toBe(true);
    expect(health.map((h) => h.ok)).toEqual([false, true]);
    await connections.closeAll();
  });

  it('connects again when the server’s configuration version changes', async () => {
    const server = fixtureServer();
    const versions: number[] = [];
    const connections = new McpConnections(limits, clock);
    for (const version of [1, 1, 2]) {
      await connections.tools(target(() => (versions.push(version), linkTo(server)), version));
    }
    expect(versions).toEqual([1, 2]);
    await connections.closeAll();
  });

  it('closes a connection nobody used for idleMs, but never one a call is still using', async () => {
    const server = fixtureServer();
    let release!: () => void;
    server.registerTool('wait', { description: 'Answers when released.' }, () => new Promise((resolve) => (release = () => resolve({ content: [{ type: 'text', text: 'released' }] }))));
    const connections = new McpConnections({ ...limits, idleMs: 1_000 }, clock);
    let connects = 0;
    const busy = target(() => (connects++, linkTo(server)));
    const other = { ...target(() => linkTo(fixtureServer())), key: 't:other' };
    const call = connections.call(busy, 'wait', {}, { timeoutMs: 60_000 });
    await new Promise((resolve) => setImmediate(resolve));
    now += 5_000;
    // Any use sweeps idle connections; the busy one is kept while its call runs.
    await connections.tools(other);
    release();
    expect(await call).toMatchObject({ content: [{ type: 'text', text: 'released' }] });
    now += 5_000;
    await connections.tools(other);
    await connections.tools(busy);
    expect(connects).toBe(2);
    await connections.closeAll();
  });

  it('forgets, and closes, only the connections whose key matches', async () => {
    const connections = new McpConnections(limits, clock);
    const closed: string[] = [];
    const keyed = (key: string): McpTarget => ({
      ...target(async () => {
        const link = await linkTo(fixtureServer());
        return { client: link.client, close: () => (closed.push(key), link.close()) };
      }),
      key,
    });
    for (const key of ['t:srv:s1', 't:srv:s2', 't:other:s1', 't:remote']) expect((await connections.tools(keyed(key))).ok).toBe(true);
    await connections.forgetWhere((key) => key.endsWith(':s1'));
    expect(closed.sort()).toEqual(['t:other:s1', 't:srv:s1']);
    expect(connections.keys().sort()).toEqual(['t:remote', 't:srv:s2']);
    await connections.closeAll();
  });

  it('gives a tool’s timeout as an error result without counting it against the server', async () => {
    const server = fixtureServer();
    server.registerTool('hang', { description: 'Never answers.' }, () => new Promise(() => undefined));
    const connections = new McpConnections(limits, clock);
    const t = target(() => linkTo(server));
    const result = await connections.call(t, 'hang', {}, { timeoutMs: 50 });
    expect(result).toEqual({ content: [{ type: 'text', text: 'hang did not answer within 0.05 s' }], isError: true });
    expect(health.every((h) => h.ok)).toBe(true);
    expect(await connections.call(t, 'ping', {}, { timeoutMs: 1_000 })).toMatchObject({ content: [{ type: 'text', text: 'pong' }] });
    await connections.closeAll();
  });
});

describe('McpConnector stdio seam', () => {
  const guard = new EgressGuard();
  const rules = () => Promise.resolve(NO_DOMAIN_RULES);

  it('reports stdio servers unavailable when no sandbox transport is installed', async () => {
    const connector = new McpConnector(guard, rules, undefined);
    expect(connector.stdioUnavailable({ tenantId: 't', sessionId: 's' })).toMatch(/cannot run on this deployment/);
    await expect(connector.connect({ transport: 'stdio', command: 'npx', args: [], env: {} }, { tenantId: 't', sessionId: 's' }, 1_000)).rejects.toThrow(/cannot run/);
  });

  it('speaks MCP over the transport the factory makes for the session, with the server’s command and env', async () => {
    const made: Array<{ ctx: McpStdioContext; spec: McpStdioSpec }> = [];
    const server = fixtureServer();
    const factory: McpStdioTransportFactory = (ctx, spec) => {
      made.push({ ctx, spec });
      const [clientSide, serverSide] = PipeTransport.pair();
      void server.connect(serverSide);
      return clientSide;
    };
    const connector = new McpConnector(guard, rules, factory);
    expect(connector.stdioUnavailable({ tenantId: 't' })).toMatch(/within a session/);
    const link = await connector.connect({ transport: 'stdio', command: 'npx', args: ['srv'], env: { TOKEN: 'x' } }, { tenantId: 't', sessionId: 's1' }, 1_000);
    expect((await link.client.listTools()).tools.map((t) => t.name)).toEqual(['ping']);
    expect(made).toEqual([{ ctx: { tenantId: 't', sessionId: 's1' }, spec: { command: 'npx', args: ['srv'], env: { TOKEN: 'x' } } }]);
    await link.close();
  });
});
