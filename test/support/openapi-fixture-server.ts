import { createServer, IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';

export interface RecordedCall {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A small pet store on loopback that serves its own OpenAPI document (JSON at
 * /openapi.json, YAML at /openapi.yaml, both with the relative server `/api`) and records
 * every request it gets. `/api/slow` never answers (a timeout to hit); `/api/away` redirects
 * to `awayUrl`, another server.
 */
export class OpenApiFixtureServer {
  readonly calls: RecordedCall[] = [];
  awayUrl = 'http://127.0.0.1:9/';
  port = 0;
  private server?: Server;
  private readonly hanging = new Set<ServerResponse>();

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests to the API itself (not to the documents). */
  get apiCalls(): RecordedCall[] {
    return this.calls.filter((c) => c.path.startsWith('/api/'));
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', this.origin);
    this.calls.push({ method: req.method ?? '', path: url.pathname + url.search, headers: req.headers, body: Buffer.concat(chunks).toString() });
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const pet = /^\/api\/pets\/([^/]+)$/.exec(url.pathname);
    if (url.pathname === '/openapi.json') return void json(200, PETSTORE_DOCUMENT);
    if (url.pathname === '/openapi.yaml') return void res.writeHead(200, { 'content-type': 'application/yaml' }).end(PETSTORE_YAML);
    if (url.pathname === '/missing.json') return void json(404, { error: 'no such document' });
    if (req.method === 'GET' && pet) {
      const id = decodeURIComponent(pet[1]);
      if (id === 'broken') return void json(503, { error: 'the pet store is closed', detail: 'x'.repeat(5000) });
      return void json(200, { id, name: `Pet ${id}`, verbose: url.searchParams.get('verbose'), trace: req.headers['x-trace'] ?? null });
    }
    if (req.method === 'POST' && url.pathname === '/api/pets') return void json(201, { created: JSON.parse(Buffer.concat(chunks).toString() || 'null') as unknown });
    if (url.pathname === '/api/slow') {
      this.hanging.add(res);
      return;
    }
    if (url.pathname === '/api/away') return void res.writeHead(302, { location: this.awayUrl }).end();
    json(404, { error: 'not found' });
  }
}

export const PETSTORE_DOCUMENT = {
  openapi: '3.0.3',
  info: { title: 'Fixture pet store', version: '1.0.0' },
  servers: [{ url: '/api' }],
  paths: {
    '/pets/{petId}': {
      get: {
        operationId: 'getPet',
        summary: 'Read one pet by id',
        parameters: [
          { name: 'petId', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'verbose', in: 'query', schema: { type: 'boolean' } },
          { name: 'X-Trace', in: 'header', schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'the pet' } },
      },
    },
    '/pets': {
      post: {
        operationId: 'createPet',
        summary: 'Add a pet',
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPet' } } } },
        responses: { '201': { description: 'created' } },
      },
    },
    '/slow': { get: { operationId: 'slow', summary: 'Never answers', responses: {} } },
    '/away': { get: { operationId: 'away', summary: 'Redirects to another server', responses: {} } },
  },
  components: {
    schemas: { NewPet: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, tag: { type: 'string' } } } },
  },
};

const PETSTORE_YAML = `openapi: 3.0.3
info:
  title: Fixture pet store (YAML)
  version: 1.0.0
servers:
  - url: /api
paths:
  /pets/{petId}:
    get:
      operationId: getPet
      summary: Read one pet by id
      parameters:
        - name: petId
          in: path
          required: true
          schema: { type: string }
      responses:
        '200': { description: the pet }
`;
