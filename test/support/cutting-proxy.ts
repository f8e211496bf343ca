import { AddressInfo, createServer, Server, Socket, connect } from 'node:net';

/** One client connection as the proxy saw it. */
export interface ProxiedConnection {
  /** The first bytes the client sent (its request line and headers). */
  requestHead: string;
  /** True when the proxy cut this connection on purpose. */
  cut: boolean;
}

/**
 * A TCP proxy on loopback in front of a server, which can break one connection in the
 * middle of an answer: `cutWhen` sees what the server sent so far on each connection, and
 * when it returns a byte count the proxy forwards only that many of the new bytes and
 * then destroys both sockets, as a dropped network would.
 */
export class CuttingProxy {
  readonly connections: ProxiedConnection[] = [];
  private server?: Server;
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly target: { host: string; port: number },
    /** Given the connection and the upstream bytes so far (the new chunk included), how many of the new chunk to forward before cutting, or undefined to go on. */
    private readonly cutWhen: (connection: ProxiedConnection, upstreamSoFar: string, chunk: Buffer) => number | undefined,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((client) => this.relay(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private relay(client: Socket): void {
    const connection: ProxiedConnection = { requestHead: '', cut: false };
    this.connections.push(connection);
    const upstream = connect(this.target.port, this.target.host);
    this.sockets.add(client).add(upstream);
    let seen = '';
    client.on('data', (chunk: Buffer) => {
      if (connection.requestHead.length < 4096) connection.requestHead += chunk.toString('latin1');
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (connection.cut) return;
      seen += chunk.toString('latin1');
      const keep = this.cutWhen(connection, seen, chunk);
      if (keep === undefined) {
        client.write(chunk);
        return;
      }
      connection.cut = true;
      client.write(chunk.subarray(0, keep), () => {
        client.destroy();
        upstream.destroy();
      });
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
