import { OpenApiOperation } from './openapi-document';
import { OperationArgumentError, operationRequest, operationTool } from './operation-tool';

const getPet: OpenApiOperation = {
  operationId: 'getPet',
  method: 'get',
  path: '/pets/{petId}',
  summary: 'Read one pet',
  parameters: [
    { name: 'petId', in: 'path', required: true, schema: { type: 'string' }, argument: 'petId' },
    { name: 'tag', in: 'query', required: false, schema: { type: 'array', items: { type: 'string' } }, description: 'Filter by tag', argument: 'tag' },
    { name: 'X-Trace', in: 'header', required: false, schema: { type: 'string' }, argument: 'X-Trace' },
  ],
};

const createPet: OpenApiOperation = {
  operationId: 'createPet',
  method: 'post',
  path: '/pets',
  description: 'Adds a pet.',
  parameters: [],
  body: { required: true, schema: { type: 'object', properties: { name: { type: 'string' } } } },
};

describe('operationTool', () => {
  it('names the tool <service>__<operationId>, describes it by its summary and maps parameters to a JSON Schema', () => {
    const tool = operationTool('petstore', getPet);
    expect(tool.name).toBe('petstore__getPet');
    expect(tool.description).toBe('Read one pet (GET /pets/{petId} on the OpenAPI service petstore)');
    expect(tool.mutating).toBe(false);
    expect(tool.inputSchema).toEqual({
      type: 'object',
      properties: {
        petId: { type: 'string', description: 'path parameter petId' },
        tag: { type: 'array', items: { type: 'string' }, description: 'Filter by tag (query parameter tag)' },
        'X-Trace': { type: 'string', description: 'header parameter X-Trace' },
      },
      required: ['petId'],
      additionalProperties: false,
    });
  });

  it('takes a JSON request body as `body`, falls back to the description, and marks every method but GET and HEAD mutating', () => {
    const tool = operationTool('petstore', createPet);
    expect(tool.description).toMatch(/^Adds a pet\. \(POST \/pets/);
    expect(tool.inputSchema).toMatchObject({ properties: { body: { type: 'object', properties: { name: { type: 'string' } } } }, required: ['body'] });
    expect(tool.mutating).toBe(true);
    for (const method of ['put', 'patch', 'delete', 'options'] as const) expect(operationTool('s', { ...createPet, method }).mutating).toBe(true);
    expect(operationTool('s', { ...getPet, method: 'head' }).mutating).toBe(false);
  });

  it('shortens names providers would refuse, deterministically', () => {
    const long = operationTool('svc', { ...getPet, operationId: 'get.pet/by id'.repeat(8) });
    expect(long.name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(long.name).toBe(operationTool('svc', { ...getPet, operationId: 'get.pet/by id'.repeat(8) }).name);
  });

  it('checks required and unknown arguments', () => {
    const { parameters } = operationTool('petstore', getPet);
    expect(parameters.safeParse({ petId: '7' }).success).toBe(true);
    const missing = parameters.safeParse({ tag: ['a'] });
    expect(missing.success).toBe(false);
    expect(missing.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual(['petId: required']);
    const unknown = parameters.safeParse({ petId: '7', owner: 'x' });
    expect(unknown.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual(['owner: not a parameter of getPet']);
  });
});

describe('operationRequest', () => {
  it('encodes path values, repeats array query values, sets headers, and stays under the base URL', () => {
    const req = operationRequest('https://api.example.com/v1', getPet, { petId: 'a/../b?c', tag: ['x y', 'z'], 'X-Trace': 't-1' });
    expect(req.method).toBe('GET');
    expect(req.url).toBe('https://api.example.com/v1/pets/a%2F..%2Fb%3Fc?tag=x+y&tag=z');
    expect(req.headers).toMatchObject({ 'X-Trace': 't-1' });
    expect(req.body).toBeUndefined();
  });

  it('sends the body as JSON', () => {
    const req = operationRequest('http://127.0.0.1:9', createPet, { body: { name: 'Rex' } });
    expect(req).toMatchObject({ url: 'http://127.0.0.1:9/pets', method: 'POST', body: '{"name":"Rex"}', headers: { 'content-type': 'application/json' } });
  });

  it('refuses values that would leave the template or break a header', () => {
    expect(() => operationRequest('https://a.example', getPet, { petId: '..' })).toThrow(OperationArgumentError);
    expect(() => operationRequest('https://a.example', getPet, { petId: { a: 1 } })).toThrow(/petId: expected a string, number or boolean, got object/);
    expect(() => operationRequest('https://a.example', getPet, { petId: '1', 'X-Trace': 'a\r\nX-Evil: 1' })).toThrow(/line breaks/);
  });
});
