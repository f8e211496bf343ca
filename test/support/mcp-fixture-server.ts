import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** A name longer than the 64 characters providers take, so Runbox must shorten it. */
export const LONG_TOOL_NAME = 'summarize_the_quarterly_report_for_the_board_with_every_footnote_kept';

/**
 * A real MCP server (the SDK's McpServer over streamable HTTP, with sessions) on a loopback
 * port, for the MCP e2e tests. Its tools: `echo` (read-only), `write_note` (mutating: no
 * readOnlyHint), `slow` (read-only, answers after `ms`), one with a long name, and any added
 * later with `addTool` or `grow` (which send notifications/tools/list_changed).
 * It records every HTTP request it gets and the headers they carried.
 */
export class McpFixtureServer {
  readonly requests: Array<{ method: string; headers: IncomingMessage['headers'] }> = [];
  readonly notes: string[] = [];
  port = 0;
  private server?: Server;
  private readonly sessions = new Map<string, { transport: StreamableHTTPServerTransport; mcp: McpServer }>();
  private readonly extraTools: string[] = [];

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  /** The same tools over the older HTTP+SSE transport only, as a server from before streamable HTTP. */
  get legacyUrl(): string {
    return `http://127.0.0.1:${this.port}/sse`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const { transport } of this.sessions.values()) await transport.close().catch(() => undefined);
    for (const transport of this.legacy.values()) await transport.close().catch(() => undefined);
    this.sessions.clear();
    this.legacy.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Forgets every session, as a restarted server would: their next requests get 404. */
  async forgetSessions(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const { transport } of sessions) await transport.close().catch(() => undefined);
  }

  /** Adds a read-only tool to every connected session (each one is told its list changed). */
  addTool(name: string): void {
    this.extraTools.push(name);
    for (const { mcp } of this.sessions.values()) this.registerExtra(mcp, name);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.requests.push({ method: req.method ?? '', headers: req.headers });
    const path = new URL(req.url ?? '/', 'http://fixture').pathname;
    if (path === '/sse' || path === '/messages') return this.handleLegacy(path, req, res);
    const id = req.headers['mcp-session-id'];
    const existing = typeof id === 'string' ? this.sessions.get(id) : undefined;
    if (existing) return existing.transport.handleRequest(req, res);
    if (typeof id === 'string') {
      // A session this server does not know (it restarted): 404, as the MCP specification says.
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(400).end('no session');
      return;
    }
    const mcp = this.build();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => void this.sessions.set(sessionId, { transport, mcp }),
    });
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  }

  private readonly legacy = new Map<string, SSEServerTransport>();

  /** GET /sse opens a session's event stream; its messages come as POST /messages?sessionId=…; POST /sse is 405. */
  private async handleLegacy(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (path === '/sse' && req.method === 'GET') {
      const transport = new SSEServerTransport('/messages', res);
      this.legacy.set(transport.sessionId, transport);
      transport.onclose = () => this.legacy.delete(transport.sessionId);
      await this.build().connect(transport);
      return;
    }
    const session = new URL(req.url ?? '/', 'http://fixture').searchParams.get('sessionId') ?? '';
    const transport = path === '/messages' && req.method === 'POST' ? this.legacy.get(session) : undefined;
    if (!transport) {
      res.writeHead(405).end();
      return;
    }
    await transport.handlePostMessage(req, res);
  }

  private build(): McpServer {
    const mcp = new McpServer({ name: 'fixture', version: '1.0.0' });
    mcp.registerTool(
      'echo',
      { description: 'Says the text back.', inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
      ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
    );
    mcp.registerTool('write_note', { description: 'Keeps a note.', inputSchema: { note: z.string() } }, ({ note }) => {
      this.notes.push(note);
      return { content: [{ type: 'text', text: `kept note ${this.notes.length}` }], structuredContent: { kept: this.notes.length } };
    });
    mcp.registerTool(
      'slow',
      { description: 'Answers after ms milliseconds.', inputSchema: { ms: z.number() }, annotations: { readOnlyHint: true } },
      async ({ ms }, extra) => {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          extra.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        return { content: [{ type: 'text', text: `slept ${ms} ms` }] };
      },
    );
    mcp.registerTool(LONG_TOOL_NAME, { description: 'A tool with a long name.', annotations: { readOnlyHint: true } }, () => ({
      content: [{ type: 'text', text: 'the long-named tool ran' }],
    }));
    // Adds `fresh_tool` to this session only, and says so on the call's own stream, so the
    // client has the notification before the call's result.
    mcp.registerTool('grow', { description: 'Adds the tool fresh_tool.', annotations: { readOnlyHint: true } }, async (extra) => {
      this.registerExtra(mcp, 'fresh_tool');
      await extra.sendNotification({ method: 'notifications/tools/list_changed' });
      return { content: [{ type: 'text', text: 'grew fresh_tool' }] };
    });
    for (const name of this.extraTools) this.registerExtra(mcp, name);
    return mcp;
  }

  private registerExtra(mcp: McpServer, name: string): void {
    mcp.registerTool(name, { description: `${name}, added later.`, annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: `${name} ran` }] }));
  }
}
