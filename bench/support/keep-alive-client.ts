import { Agent, request } from 'node:http';

/**
 * A JSON client over node:http with kept-alive connections, for a bench's hot loop. The
 * bench runs on the machine it measures, so its client's CPU is taken from the services it
 * calls; `fetch` (undici) spent about 4 ms of CPU per call here, node:http well under half
 * of that. Callers of Runbox run elsewhere: what the client costs is no part of the figure.
 */
export class KeepAliveClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 64 });
  private readonly base: URL;

  constructor(baseUrl: string, private readonly apiKey: string) {
    this.base = new URL(baseUrl);
  }

  post(path: string, body: unknown): Promise<{ status: number; text: string }> {
    const payload = Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = request(
        {
          agent: this.agent,
          host: this.base.hostname,
          port: this.base.port,
          method: 'POST',
          path,
          headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json', 'content-length': payload.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
