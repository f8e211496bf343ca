/**
 * MCP client benchmark: `npm run bench:mcp`. Prints figures; asserts nothing.
 *
 *  1. Listing a server's tools as each model turn does: from the connection cache, next to
 *     what it would cost without one (connect, initialize, tools/list, close, every time).
 *  2. One tool call (`echo`) over the gateway's guarded fetch (egress check, a fresh socket
 *     to the checked address, a bounded body), next to the SDK's own transport with Node's
 *     plain fetch, on the same server.
 *
 * The server is the SDK's McpServer over streamable HTTP on loopback (the e2e tests' fixture);
 * everything runs in this process and is stopped at the end.
 */
import { cpus, loadavg } from 'node:os';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { EgressGuard, NO_DOMAIN_RULES } from '@app/egress';
import { McpConnections, McpTarget, MCP_LIMITS } from '../apps/gateway/src/mcp/mcp-connections';
import { McpConnector } from '../apps/gateway/src/mcp/mcp-connector';
import { McpFixtureServer } from '../test/support/mcp-fixture-server';
import { percentile, timeIt } from './support/stats';

const ITERATIONS = { warmup: 20, cached: 2_000, uncached: 200, calls: 500 };

function report(label: string, samples: number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  const p50 = percentile(s, 50);
  console.log(`  ${label.padEnd(58)} p50 ${p50.toFixed(3).padStart(9)} ms   p99 ${percentile(s, 99).toFixed(3).padStart(9)} ms   (n=${s.length})`);
  return p50;
}

async function main(): Promise<void> {
  const server = await new McpFixtureServer().start();
  const guard = new EgressGuard({ allowPrivateHosts: [`127.0.0.1:${server.port}`] });
  const connector = new McpConnector(guard, () => Promise.resolve(NO_DOMAIN_RULES), undefined);
  const endpoint = { transport: 'streamable_http' as const, url: server.url, headers: {} };
  const target: McpTarget = {
    key: 'bench:server',
    version: 1,
    connect: (timeoutMs) => connector.connect(endpoint, { tenantId: 'bench' }, timeoutMs),
    onHealth: () => undefined,
  };
  // Fresh for the whole run: the cache is what is measured, not its expiry.
  const connections = new McpConnections({ ...MCP_LIMITS, listFreshMs: 3_600_000 });
  const plain = new Client({ name: 'bench', version: '1' });
  try {
    console.log(`MCP client benchmark (${cpus().length} cores, load ${loadavg()[0].toFixed(2)})`);

    console.log('\nListing tools (each model turn lists them):');
    await timeIt(ITERATIONS.warmup, () => connections.tools(target));
    const cached = report('from the connection cache', await timeIt(ITERATIONS.cached, () => connections.tools(target)));
    const uncached = report('connect + initialize + tools/list + close, each time', await timeIt(ITERATIONS.uncached, async () => {
      const link = await connector.connect(endpoint, { tenantId: 'bench' }, 10_000);
      await link.client.listTools();
      await link.close();
    }));
    console.log(`  the cache answers ${(uncached / cached).toFixed(0)}× faster (p50)`);

    console.log('\nOne tool call (echo) on a held connection:');
    await plain.connect(new StreamableHTTPClientTransport(new URL(server.url)));
    const args = { text: 'hello' };
    await timeIt(ITERATIONS.warmup, () => connections.call(target, 'echo', args, { timeoutMs: 10_000 }));
    await timeIt(ITERATIONS.warmup, () => plain.callTool({ name: 'echo', arguments: args }));
    const guarded = report('guarded fetch (egress check, fresh socket, bounded body)', await timeIt(ITERATIONS.calls, () => connections.call(target, 'echo', args, { timeoutMs: 10_000 })));
    const direct = report("the SDK's transport with Node's plain fetch", await timeIt(ITERATIONS.calls, () => plain.callTool({ name: 'echo', arguments: args })));
    console.log(`  guarded / plain: ${(guarded / direct).toFixed(2)}× (p50)`);
  } finally {
    await plain.close().catch(() => undefined);
    await connections.closeAll();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
