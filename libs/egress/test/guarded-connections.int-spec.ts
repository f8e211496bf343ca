import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import net, { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { EgressGuard, EgressRefusedError, guardedFetch, guardedWebSocket, NO_DOMAIN_RULES, Resolver } from '../src';

/**
 * guardedFetch and guardedWebSocket against a server on loopback, reached under names only a
 * stub resolver knows (`.example` has no real address): a connection that succeeds went to
 * the address the guard checked, since resolving the name a second time would fail.
 */
describe('connections through the egress guard', () => {
  let server: Server;
  let wss: WebSocketServer;
  let port = 0;
  const seen: IncomingHttpHeaders[] = [];
  const asked: string[] = [];
  const resolver: Resolver = async (host) => {
    asked.push(host);
    const table: Record<string, string> = { 'app.example': '127.0.0.1', 'metadata.example': '169.254.169.254', 'intranet.example': '10.0.0.1' };
    if (!table[host]) throw new Error('ENOTFOUND');
    return [{ address: table[host], family: 4 }];
  };
  let guard: EgressGuard;

  beforeAll(async () => {
    wss = new WebSocketServer({ noServer: true });
    server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('hello from loopback');
    });
    server.on('upgrade', (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        seen.push(req.headers);
        ws.on('message', (data) => ws.send(`echo: ${String(data)}`));
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    guard = new EgressGuard({ resolver, allowPrivateHosts: [`app.example:${port}`] });
  });

  afterAll(async () => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    seen.length = 0;
    asked.length = 0;
  });

  it('fetches from the checked address, with the name as the Host header', async () => {
    const res = await guardedFetch(guard, `http://app.example:${port}/x`, { rules: NO_DOMAIN_RULES, timeoutMs: 5_000, maxBytes: 1_000, maxRedirects: 0 });
    expect(res.body.toString()).toBe('hello from loopback');
    expect(res.address).toBe('127.0.0.1');
    expect(seen[0].host).toBe(`app.example:${port}`);
    expect(asked).toEqual(['app.example']);
  });

  it('opens a WebSocket to the checked address and passes messages', async () => {
    const ws = await guardedWebSocket(guard, `ws://app.example:${port}/live`, { rules: NO_DOMAIN_RULES, timeoutMs: 5_000, maxMessageBytes: 1_000 });
    try {
      const answer = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
      ws.send('ping');
      expect(await answer).toBe('echo: ping');
      expect(seen[0].host).toBe(`app.example:${port}`);
      expect(asked).toEqual(['app.example']);
    } finally {
      ws.terminate();
    }
  });

  describe('refusals, before any connection', () => {
    let connect: jest.SpyInstance;
    beforeEach(() => {
      connect = jest.spyOn(net.Socket.prototype, 'connect').mockImplementation(() => {
        throw new Error('a connection was attempted');
      });
    });
    afterEach(() => connect.mockRestore());

    it.each([
      ['ws://metadata.example/', 'link-local'],
      ['ws://intranet.example/', 'private'],
      ['ws://127.0.0.1:5432/', 'loopback'],
      ['wss://[::1]:8443/', 'loopback'],
      ['ws://2130706433/', 'loopback'],
    ])('refuses %s (%s)', async (url, kind) => {
      const refusal = await guardedWebSocket(guard, url, { rules: NO_DOMAIN_RULES, timeoutMs: 5_000, maxMessageBytes: 1_000 }).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(EgressRefusedError);
      expect(refusal).toMatchObject({ code: 'address_not_allowed', addressClass: kind });
      expect(connect).not.toHaveBeenCalled();
    });

    it('applies the tenant deny list, and takes only ws and wss URLs', async () => {
      const denied = guardedWebSocket(guard, `ws://app.example:${port}/`, { rules: { allow: [], deny: ['app.example'] }, timeoutMs: 5_000, maxMessageBytes: 1_000 });
      await expect(denied).rejects.toMatchObject({ code: 'domain_denied' });
      const http = guardedWebSocket(guard, `http://app.example:${port}/`, { rules: NO_DOMAIN_RULES, timeoutMs: 5_000, maxMessageBytes: 1_000 });
      await expect(http).rejects.toMatchObject({ code: 'scheme_not_allowed' });
      expect(connect).not.toHaveBeenCalled();
    });
  });
});
