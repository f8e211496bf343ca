import { bundleProgram } from './mcp-server-bundle';

/**
 * A stdio MCP server written with the SDK's server half, for tests that run it inside a
 * sandbox. Its tools report where it runs (uid, hostname, the processes it can see) and
 * misbehave on request (`flood`: one stdout line of `bytes` bytes, outside the protocol).
 * Arguments after the script name are echoed by `whoami`, to tell two servers apart.
 */
const SOURCE = `
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { CallToolRequestSchema, ListToolsRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
const fs = require('fs');
const os = require('os');

const server = new Server({ name: 'sandbox-probe', version: '1.0.0' }, { capabilities: { tools: {} } });
const noArguments = { type: 'object', properties: {} };
const tools = [
  { name: 'whoami', description: 'Where this server runs', inputSchema: noArguments },
  { name: 'echo', description: 'Returns its text', inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } },
  { name: 'processes', description: 'Command lines of every process this server can see', inputSchema: noArguments },
  { name: 'flood', description: 'Writes one stdout line of the given size', inputSchema: { type: 'object', properties: { bytes: { type: 'number' } } } },
];
const text = (value) => ({ content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] });
const commandLine = (pid) => {
  try {
    return fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0').join(' ').trim();
  } catch (err) {
    return '';
  }
};

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const args = request.params.arguments || {};
  switch (request.params.name) {
    case 'whoami':
      return text({ uid: process.getuid(), gid: process.getgid(), hostname: os.hostname(), cwd: process.cwd(), argv: process.argv.slice(2) });
    case 'echo':
      return text(args.text);
    case 'processes':
      return text(fs.readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name)).map(commandLine).filter(Boolean));
    case 'flood':
      process.stdout.write('x'.repeat(args.bytes) + '\\n');
      return new Promise(() => undefined);
    default:
      throw new Error('unknown tool ' + request.params.name);
  }
});
server.connect(new StdioServerTransport()).catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

export function probeServerBundle(): string {
  return bundleProgram(SOURCE, [
    '@modelcontextprotocol/sdk/server/index.js',
    '@modelcontextprotocol/sdk/server/stdio.js',
    '@modelcontextprotocol/sdk/types.js',
  ]);
}
