/**
 * What running a stdio MCP server in the sandbox costs, printed, never asserted (run with
 * `npm run bench:mcp-stdio`).
 *
 *   sandbox   `tools/call echo` through the SDK Client over SandboxStdioTransport: gateway →
 *             NATS → executor → agent channel → the server's stdin, and back by the read
 *             long-poll, the server running in a session's sandbox container
 *   local     the same call to the same server run as a plain child process of this one
 *             (the SDK's own StdioClientTransport): what a host-side server would cost
 *   connect   starting the server in the sandbox and the MCP initialize handshake
 *
 * It starts its own gateway and executor (the test stack) and removes all it made.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SandboxStdioTransportFactory } from '../apps/gateway/src/mcp/sandbox-stdio-transport';
import { probeServerBundle } from '../test/support/mcp-probe-server';
import { TestStack } from '../test/support/test-stack';
import { percentile } from './support/stats';

const SAMPLES = 300;
const WARM_UP = 30;
const CONNECTS = 15;

async function main(): Promise<void> {
  process.stdout.write(`mcp-stdio bench: ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const bundle = probeServerBundle();
  const stack = await new TestStack({
    env: { RUNBOX_MAX_BODY_BYTES: String(8 * 1024 * 1024), RUNBOX_MAX_JSON_STRING_CHARS: String(4 * 1024 * 1024) },
  }).start();
  const folder = mkdtempSync(join(tmpdir(), 'runbox-mcp-bench-'));
  try {
    const tenant = await stack.createTenant();
    const session = (await stack.request('POST', '/v1/sessions', { key: tenant.apiKey, body: {} })).body.id as string;
    const written = await stack.request('POST', `/v1/sessions/${session}/tools/write_file`, {
      key: tenant.apiKey,
      body: { arguments: { path: 'mcp/server.js', content: bundle } },
    });
    if (written.status !== 200) throw new Error(`writing the server failed: ${written.text}`);
    const factory = stack.gatewayApp.get(SandboxStdioTransportFactory);
    const ctx = { tenantId: tenant.tenantId, sessionId: session };
    const spec = { command: 'node', args: ['mcp/server.js'] };

    const connects: number[] = [];
    for (let i = 0; i < CONNECTS; i++) {
      const client = new Client({ name: 'bench', version: '1' });
      const started = performance.now();
      await client.connect(factory.create(ctx, spec));
      connects.push(performance.now() - started);
      await client.close();
    }

    const inSandbox = new Client({ name: 'bench', version: '1' });
    await inSandbox.connect(factory.create(ctx, spec));
    const sandbox = await calls(inSandbox);
    await inSandbox.close();

    writeFileSync(join(folder, 'server.js'), bundle);
    const local = new Client({ name: 'bench', version: '1' });
    await local.connect(new StdioClientTransport({ command: process.execPath, args: [join(folder, 'server.js')], cwd: folder }));
    const plain = await calls(local);
    await local.close();

    const row = (name: string, s: number[]) => `${name.padEnd(34)} ${String(s.length).padStart(4)}  ${ms(percentile(s, 50))}  ${ms(percentile(s, 99))}`;
    process.stdout.write(`\n${'measure'.padEnd(34)} ${'n'.padStart(4)}  ${'p50'.padStart(9)}  ${'p99'.padStart(9)}\n`);
    process.stdout.write(`${row('tools/call echo, server in sandbox', sandbox)}\n${row('tools/call echo, server on host', plain)}\n`);
    process.stdout.write(`${row('connect (start + initialize)', connects)}\n`);
    process.stdout.write(`\nsandbox / host (p50): ${(percentile(sandbox, 50) / percentile(plain, 50)).toFixed(2)}\n`);
  } finally {
    rmSync(folder, { recursive: true, force: true });
    await stack.stop();
  }
}

async function calls(client: Client): Promise<number[]> {
  for (let i = 0; i < WARM_UP; i++) await client.callTool({ name: 'echo', arguments: { text: 'warm' } });
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    await client.callTool({ name: 'echo', arguments: { text: `call ${i}` } });
    samples.push(performance.now() - started);
  }
  return samples;
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`.padStart(9);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
