import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { eventually } from '@app/testing';
import Docker from 'dockerode';
import { hostname } from 'node:os';
import { SandboxStdioClient } from '../apps/gateway/src/mcp/sandbox-stdio.client';
import { SandboxStdioTransport, SandboxStdioTransportFactory } from '../apps/gateway/src/mcp/sandbox-stdio-transport';
import { probeServerBundle } from './support/mcp-probe-server';
import { TenantCredentials, TestStack } from './support/test-stack';

interface ToolResult {
  output: string;
  metadata: Record<string, any>;
  is_error: boolean;
}

/**
 * stdio MCP servers inside the session's sandbox: the SDK's Client over
 * SandboxStdioTransport, through the real gateway, NATS, executor and sandbox container,
 * speaking to a server built with the SDK's server half and shipped into the workspace.
 */
describe('stdio MCP servers in the sandbox', () => {
  let stack: TestStack;
  let tenant: TenantCredentials;
  let transports: SandboxStdioTransportFactory;
  const clients: Client[] = [];
  const docker = new Docker();

  const newSession = async (): Promise<string> => (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id;
  const tool = async (sessionId: string, name: string, args: Record<string, unknown>): Promise<ToolResult> => {
    const res = await stack.request('POST', `/v1/sessions/${sessionId}/tools/${name}`, { key: tenant.apiKey, body: { arguments: args } });
    expect(res.status).toBe(200);
    return res.body;
  };
  const stdout = (result: ToolResult): string => result.output.split('stdout:\n')[1] ?? '';

  /** A session whose workspace holds the probe server at mcp/server.js. */
  let bundle: string;
  const sessionWithServer = async (): Promise<string> => {
    const id = await newSession();
    const written = await tool(id, 'write_file', { path: 'mcp/server.js', content: bundle });
    expect(written.is_error).toBe(false);
    return id;
  };
  const connect = async (sessionId: string, args: string[] = []): Promise<{ client: Client; transport: SandboxStdioTransport }> => {
    const transport = transports.create({ tenantId: tenant.tenantId, sessionId }, { command: 'node', args: ['mcp/server.js', ...args] });
    const client = new Client({ name: 'runbox-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(transport);
    return { client, transport };
  };
  const callText = async (client: Client, name: string, args: Record<string, unknown> = {}): Promise<string> => {
    const result = (await client.callTool({ name, arguments: args })) as { content: Array<{ type: string; text: string }> };
    return result.content[0].text;
  };

  beforeAll(async () => {
    bundle = probeServerBundle();
    stack = await new TestStack({
      // The probe server is one 1.8 MB file, written with one write_file call.
      env: { RUNBOX_MAX_BODY_BYTES: String(8 * 1024 * 1024), RUNBOX_MAX_JSON_STRING_CHARS: String(4 * 1024 * 1024) },
    }).start();
    tenant = await stack.createTenant();
    transports = stack.gatewayApp.get(SandboxStdioTransportFactory);
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await stack?.stop();
  });

  it('lists and calls the tools of a server written with the SDK, running in the session sandbox as the sandbox user', async () => {
    const id = await sessionWithServer();
    const { client, transport } = await connect(id, ['first']);
    expect(transport.executorId).toBe(stack.executorId);

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['whoami', 'echo', 'processes', 'flood']);
    expect(await callText(client, 'echo', { text: 'hello from the sandbox ✓' })).toBe('hello from the sandbox ✓');

    const where = JSON.parse(await callText(client, 'whoami'));
    const sandboxHost = stdout(await tool(id, 'terminal', { command: 'hostname' })).trim();
    expect(where).toEqual({ uid: 1000, gid: 1000, hostname: sandboxHost, cwd: '/workspace', argv: ['first'] });
    expect(where.hostname).not.toBe(hostname());
    await client.close();
  });

  it('runs a server with npx --offline from a package in the workspace, with no network', async () => {
    const id = await newSession();
    const pkg = { name: 'probe-server', version: '1.0.0', bin: { 'probe-server': 'server.js' } };
    await tool(id, 'write_file', { path: 'mcp/node_modules/probe-server/package.json', content: JSON.stringify(pkg) });
    await tool(id, 'write_file', { path: 'mcp/node_modules/probe-server/server.js', content: `#!/usr/bin/env node\n${bundle}` });
    // What `npm install` would have made: the bin link, executable.
    const linked = await tool(id, 'terminal', {
      command: 'cd mcp && chmod +x node_modules/probe-server/server.js && mkdir -p node_modules/.bin && ln -s ../probe-server/server.js node_modules/.bin/probe-server',
    });
    expect(linked.output).toContain('exit_code: 0');
    const transport = transports.create({ tenantId: tenant.tenantId, sessionId: id }, { command: 'npx', args: ['--offline', 'probe-server', 'via-npx'], cwd: 'mcp' });
    const client = new Client({ name: 'runbox-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(transport);
    expect(JSON.parse(await callText(client, 'whoami'))).toMatchObject({ uid: 1000, cwd: '/workspace/mcp', argv: ['via-npx'] });
    await client.close();
  });

  it('fails connect with the server’s own stderr when it exits at start', async () => {
    const id = await newSession();
    const transport = transports.create(
      { tenantId: tenant.tenantId, sessionId: id },
      { command: 'node', args: ['-e', 'console.error("probe: cannot read /workspace/config.json"); process.exit(3)'] },
    );
    const client = new Client({ name: 'runbox-test', version: '1.0.0' });
    // Under the SDK's own request timeout, a hang would fail with "Request timed out" instead.
    await expect(client.connect(transport)).rejects.toThrow(/exited with code 3.*probe: cannot read \/workspace\/config\.json/s);
  });

  it('fails connect naming the command when it does not exist', async () => {
    const id = await newSession();
    const transport = transports.create({ tenantId: tenant.tenantId, sessionId: id }, { command: 'no-such-server' });
    const client = new Client({ name: 'runbox-test', version: '1.0.0' });
    await expect(client.connect(transport)).rejects.toThrow(/could not start the MCP server in the sandbox \(spawn_failed\): could not start no-such-server/);
  });

  it('ends the connection with an error when the server writes a line over the limit, and stops it', async () => {
    const id = await sessionWithServer();
    const { client } = await connect(id, ['flooder']);
    const closed = new Promise<void>((resolve) => (client.onclose = resolve));
    await expect(callText(client, 'flood', { bytes: 2 * 1024 * 1024 })).rejects.toThrow(/a line of more than 1048576 bytes on stdout/);
    await closed;
    await eventually('the flooding server to be gone', async () => !stdout(await tool(id, 'terminal', { command: 'ps -eo args' })).includes('flooder'));
  });

  it('stops the server when the client closes', async () => {
    const id = await sessionWithServer();
    const { client } = await connect(id, ['closing']);
    expect(stdout(await tool(id, 'terminal', { command: 'ps -eo args' }))).toContain('node mcp/server.js closing');
    await client.close();
    await eventually('the server to be gone', async () => !stdout(await tool(id, 'terminal', { command: 'ps -eo args' })).includes('closing'));
  });

  it('loses the server with its session: deleting the session removes the process with the sandbox and closes the client', async () => {
    const id = await sessionWithServer();
    const { client } = await connect(id, ['doomed']);
    const closed = new Promise<void>((resolve) => (client.onclose = resolve));
    const deleted = await stack.request('DELETE', `/v1/sessions/${id}`, { key: tenant.apiKey });
    expect(deleted.status).toBe(204);
    await closed;
    const left = await docker.listContainers({ all: true, filters: { label: [`runbox.session=${id}`] } });
    expect(left).toEqual([]);
    await expect(callText(client, 'echo', { text: 'still there?' })).rejects.toThrow(/Not connected|not connected/);
  });

  it('keeps two sessions’ servers apart: neither sees the other’s process, nor reaches it by handle', async () => {
    const [a, b] = await Promise.all([sessionWithServer(), sessionWithServer()]);
    const [first, second] = await Promise.all([connect(a, ['marker-a']), connect(b, ['marker-b'])]);
    const seenByA = JSON.parse(await callText(first.client, 'processes')) as string[];
    const seenByB = JSON.parse(await callText(second.client, 'processes')) as string[];
    expect(seenByA.some((p) => p.includes('marker-a'))).toBe(true);
    expect(seenByA.some((p) => p.includes('marker-b'))).toBe(false);
    expect(seenByB.some((p) => p.includes('marker-b'))).toBe(true);
    expect(seenByB.some((p) => p.includes('marker-a'))).toBe(false);

    // A process's handle is good only in its own session: sent for session B (same tenant,
    // same executor) or by another tenant naming session A, it finds nothing.
    const port = stack.gatewayApp.get(SandboxStdioClient);
    const inA = { tenantId: tenant.tenantId, sessionId: a };
    const started = await port.start(inA, stack.executorId, { command: 'node', args: ['mcp/server.js', 'by-handle'] });
    if (!started.ok) throw new Error(started.error.message);
    const other = await stack.createTenant();
    for (const stranger of [{ tenantId: tenant.tenantId, sessionId: b }, { tenantId: other.tenantId, sessionId: a }]) {
      expect(await port.read(stranger, stack.executorId, started.handle, 0, 0)).toMatchObject({ ok: false, error: { code: 'not_found' } });
      expect(await port.write(stranger, stack.executorId, started.handle, '{}\n')).toMatchObject({ ok: false, error: { code: 'not_found' } });
      expect(await port.stop(stranger, stack.executorId, started.handle)).toMatchObject({ ok: false, error: { code: 'not_found' } });
    }
    expect(await port.read(inA, stack.executorId, started.handle, 0, 0)).toMatchObject({ ok: true, exited: null });
    expect(await port.stop(inA, stack.executorId, started.handle)).toMatchObject({ ok: true });
    expect(await callText(first.client, 'echo', { text: 'a is fine' })).toBe('a is fine');
  });
});
