import { MAX_OPERATIONS, OpenApiDocumentError, parseSpecText, readOpenApiDocument } from './openapi-document';

function petstore(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    openapi: '3.0.3',
    info: { title: 'Petstore', version: '1' },
    servers: [{ url: 'https://api.example.com/v1/' }],
    paths: {
      '/pets/{petId}': {
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: {
          operationId: 'getPet',
          summary: 'Read one pet',
          parameters: [
            { name: 'verbose', in: 'query', schema: { type: 'boolean' } },
            { $ref: '#/components/parameters/TraceHeader' },
          ],
        },
      },
      '/pets': {
        post: {
          operationId: 'createPet',
          description: 'Adds a pet.',
          requestBody: { required: true, content: { 'application/json; charset=utf-8': { schema: { $ref: '#/components/schemas/Pet' } } } },
        },
        get: { summary: 'no id here' },
      },
    },
    components: {
      parameters: { TraceHeader: { name: 'X-Trace', in: 'header', description: 'A trace id', schema: { type: 'string' } } },
      schemas: {
        Pet: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, friends: { type: 'array', items: { $ref: '#/components/schemas/Pet' } } } },
      },
    },
    ...extra,
  };
}

const fails = (raw: unknown, options: Parameters<typeof readOpenApiDocument>[1] = {}) => {
  try {
    readOpenApiDocument(raw, options);
  } catch (err) {
    expect(err).toBeInstanceOf(OpenApiDocumentError);
    return (err as Error).message;
  }
  throw new Error('the document was accepted');
};

describe('readOpenApiDocument', () => {
  it('keeps the first server, the operations with ids, their parameters and JSON bodies, refs resolved', () => {
    const { document, skipped } = readOpenApiDocument(petstore());
    expect(document.title).toBe('Petstore');
    expect(document.baseUrl).toBe('https://api.example.com/v1');
    expect(document.operations.map((o) => `${o.method} ${o.path} ${o.operationId}`)).toEqual(['get /pets/{petId} getPet', 'post /pets createPet']);
    const [getPet, createPet] = document.operations;
    expect(getPet.summary).toBe('Read one pet');
    expect(getPet.parameters).toEqual([
      { name: 'petId', in: 'path', required: true, schema: { type: 'string' }, argument: 'petId' },
      { name: 'verbose', in: 'query', required: false, schema: { type: 'boolean' }, argument: 'verbose' },
      { name: 'X-Trace', in: 'header', required: false, description: 'A trace id', schema: { type: 'string' }, argument: 'X-Trace' },
    ]);
    expect(createPet.body?.required).toBe(true);
    // The recursive reference stops where it would repeat.
    expect(createPet.body?.schema).toEqual({
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string' }, friends: { type: 'array', items: { description: 'recursive: #/components/schemas/Pet' } } },
    });
    expect(skipped).toEqual([{ operation: 'GET /pets', reason: 'it has no operationId' }]);
  });

  it('offers only the chosen operations and names unknown ones', () => {
    expect(readOpenApiDocument(petstore(), { chosen: ['createPet'] }).document.operations.map((o) => o.operationId)).toEqual(['createPet']);
    expect(fails(petstore(), { chosen: ['getPet', 'deletePet'] })).toBe('operations: "deletePet" not in the document (it has: getPet, createPet)');
  });

  it('resolves a relative server against where the document came from, and refuses it inline', () => {
    const relative = petstore({ servers: [{ url: '/api' }] });
    expect(readOpenApiDocument(relative, { specUrl: 'http://127.0.0.1:8080/docs/openapi.json' }).document.baseUrl).toBe('http://127.0.0.1:8080/api');
    expect(readOpenApiDocument(petstore({ servers: undefined }), { specUrl: 'http://h.example/openapi.json' }).document.baseUrl).toBe('http://h.example');
    expect(fails(relative)).toMatch(/servers\[0\]\.url "\/api" is not an absolute URL/);
  });

  it('fills server variables from their defaults and refuses other schemes and credentials in the URL', () => {
    const withVars = petstore({ servers: [{ url: 'https://{region}.example.com', variables: { region: { default: 'eu' } } }] });
    expect(readOpenApiDocument(withVars).document.baseUrl).toBe('https://eu.example.com');
    expect(fails(petstore({ servers: [{ url: 'https://{region}.example.com' }] }))).toMatch(/\{region\}, which has no default/);
    expect(fails(petstore({ servers: [{ url: 'ftp://example.com' }] }))).toMatch(/http or https/);
    expect(fails(petstore({ servers: [{ url: 'https://u:p@example.com' }] }))).toMatch(/user name or password/);
  });

  it('refuses remote references, dangling ones, and documents that are not OpenAPI 3', () => {
    const remote = petstore();
    (remote.components as { schemas: Record<string, unknown> }).schemas.Pet = { $ref: 'https://evil.example/pet.json' };
    expect(fails(remote)).toMatch(/points outside the document; only local references/);
    const dangling = petstore();
    (dangling.components as { schemas: Record<string, unknown> }).schemas.Pet = { $ref: '#/components/schemas/Nope' };
    expect(fails(dangling)).toMatch(/points at nothing/);
    expect(fails({ swagger: '2.0', paths: {} })).toMatch(/Swagger 2.0/);
    expect(fails({ openapi: '3.1.0' })).toMatch(/no "paths"/);
    expect(fails([])).toMatch(/JSON object/);
  });

  it('refuses a document whose references multiply past the bound', () => {
    // Each level refers to the previous one ten times: 10^8 copies if expanded.
    const schemas: Record<string, unknown> = { L0: { type: 'string' } };
    for (let i = 1; i <= 8; i++) schemas[`L${i}`] = { type: 'object', properties: Object.fromEntries(Array.from({ length: 10 }, (_, k) => [`p${k}`, { $ref: `#/components/schemas/L${i - 1}` }])) };
    const bomb = petstore({
      components: { schemas },
      paths: { '/bomb': { post: { operationId: 'bomb', requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/L8' } } } } } } },
    });
    expect(fails(bomb)).toMatch(/larger than/);
  });

  it('skips operations it cannot call, and refuses them when chosen', () => {
    const doc = petstore();
    Object.assign(doc.paths as Record<string, unknown>, {
      '/upload': { post: { operationId: 'upload', requestBody: { required: true, content: { 'multipart/form-data': { schema: {} } } } } },
      '/login': { get: { operationId: 'login', parameters: [{ name: 'sid', in: 'cookie', required: true }] } },
      '/things/{id}': { get: { operationId: 'thing' } },
    });
    const { skipped } = readOpenApiDocument(doc);
    expect(skipped.map((s) => s.operation)).toEqual(['GET /pets', 'upload', 'login', 'thing']);
    expect(fails(doc, { chosen: ['upload'] })).toMatch(/"upload" cannot be offered: its request body is multipart\/form-data/);
  });

  it('caps the operations one service offers', () => {
    const paths = Object.fromEntries(Array.from({ length: MAX_OPERATIONS + 1 }, (_, i) => [`/op${i}`, { get: { operationId: `op${i}` } }]));
    expect(fails(petstore({ paths }))).toMatch(new RegExp(`has ${MAX_OPERATIONS + 1} usable operations; at most ${MAX_OPERATIONS}`));
    expect(readOpenApiDocument(petstore({ paths }), { chosen: ['op1', 'op2'] }).document.operations).toHaveLength(2);
  });

  it('drops header parameters HTTP reserves and renames arguments that would collide', () => {
    const doc = petstore({
      paths: {
        '/items/{id}': {
          put: {
            operationId: 'putItem',
            parameters: [
              { name: 'id', in: 'path', required: true },
              { name: 'id', in: 'query' },
              { name: 'Authorization', in: 'header', required: true },
              { name: 'body', in: 'query' },
            ],
            requestBody: { content: { 'application/json': { schema: { type: 'object' } } } },
          },
        },
      },
    });
    const [op] = readOpenApiDocument(doc).document.operations;
    expect(op.parameters.map((p) => `${p.in}:${p.name}→${p.argument}`)).toEqual(['path:id→id', 'query:id→query_id', 'query:body→query_body']);
  });

  it('copies no __proto__ key into the stored schemas', () => {
    const doc = parseSpecText(
      '{"openapi":"3.0.0","servers":[{"url":"https://a.example"}],"paths":{"/a":{"post":{"operationId":"a","requestBody":{"content":{"application/json":{"schema":{"__proto__":{"polluted":true},"type":"object"}}}}}}}}',
    );
    const [op] = readOpenApiDocument(doc).document.operations;
    expect(op.body?.schema).toEqual({ type: 'object' });
    expect(Object.getPrototypeOf(op.body?.schema)).toBe(Object.prototype);
  });
});

describe('parseSpecText', () => {
  it('reads JSON and YAML and says when it is neither', () => {
    expect(parseSpecText('{"openapi":"3.0.0"}')).toEqual({ openapi: '3.0.0' });
    expect(parseSpecText('openapi: 3.0.0\npaths:\n  /a:\n    get:\n      operationId: a\n')).toEqual({ openapi: '3.0.0', paths: { '/a': { get: { operationId: 'a' } } } });
    expect(() => parseSpecText('a: [\n')).toThrow(/not JSON or YAML/);
  });

  it('refuses YAML whose aliases would expand it', () => {
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 12; i++) lines.push(`a${i}: &a${i} [${Array.from({ length: 10 }, () => `*a${i - 1}`).join(', ')}]`);
    expect(() => parseSpecText(lines.join('\n'))).toThrow(OpenApiDocumentError);
  });
});
