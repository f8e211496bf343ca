import { CanActivate, Controller, Delete, Get, HttpCode, Post, Type, UseGuards } from '@nestjs/common';
import { ErrorCode } from '@app/errors';
import { z } from 'zod';
import { AdminGuard } from '../auth/admin.guard';
import { ApiKeyGuard } from '../auth/api-key.guard';
import { PathId, ValidBody, ValidHeader, ValidQuery } from '../common/validation/request-parts';
import { CatalogueRoute, routeParts } from '../common/validation/route-catalogue';
import { buildApiDocument, openApiPath, UndocumentedRoutesError } from './api-document';
import { ApiOperation, eventStream } from './api-operation';
import { REFERENCE_SCRIPT } from './reference-page';

const body = z.object({ name: z.string().min(1), size: z.number().int().default(3) }).strict();
const query = z.object({ limit: z.coerce.number().int().max(50).default(10).describe('how many'), after: z.string().optional() }).strict();
const thing = z.object({ id: z.string(), name: z.string(), size: z.number().int() }).meta({ id: 'Thing' });

@Controller('v1/things')
@UseGuards(ApiKeyGuard)
class ThingsController {
  @Post()
  @ApiOperation({ summary: 'Make a thing', response: thing, errors: [ErrorCode.Conflict] })
  create(@ValidBody(body) _body: unknown, @ValidHeader('idempotency-key', z.string().optional()) _key: string) {
    return undefined;
  }

  @Get()
  @ApiOperation({ summary: 'List things', response: z.object({ data: z.array(thing) }) })
  list(@ValidQuery(query) _q: unknown) {
    return undefined;
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a thing' })
  remove(@PathId('thing') _id: string) {
    return undefined;
  }

  @Get(':id/events')
  @ApiOperation({ summary: 'Its events', response: eventStream({ 'thing.done': z.object({ ok: z.boolean() }) }, ['thing.done']) })
  events(@PathId('thing') _id: string) {
    return undefined;
  }

  @Get('plain')
  plain() {
    return undefined;
  }

  @Post('plain')
  alsoPlain() {
    return undefined;
  }
}

@Controller('v1/admin/things')
@UseGuards(AdminGuard)
class AdminThingsController {
  @Get()
  @ApiOperation({ summary: 'Every tenant\'s things', response: z.object({ data: z.array(thing) }) })
  all() {
    return undefined;
  }
}

class CustomGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

@Controller('v1/odd')
@UseGuards(CustomGuard)
class OddController {
  @Get()
  @ApiOperation({ summary: 'Odd', response: z.object({}) })
  get() {
    return undefined;
  }
}

/** What the route catalogue reads from a running app, for one handler. */
function route(controller: Type, handler: string, method: string, path: string): CatalogueRoute {
  return { method, path, controller, handler, ...routeParts(controller, handler) };
}

const documented = [
  route(ThingsController, 'create', 'POST', '/v1/things'),
  route(ThingsController, 'list', 'GET', '/v1/things'),
  route(ThingsController, 'remove', 'DELETE', '/v1/things/:id'),
  route(ThingsController, 'events', 'GET', '/v1/things/:id/events'),
  route(AdminThingsController, 'all', 'GET', '/v1/admin/things'),
];

describe('buildApiDocument', () => {
  const doc = buildApiDocument(documented);
  const op = (path: string, method: string) => doc.paths[path][method];

  it('refuses a route without @ApiOperation, naming every such route and its handler', () => {
    const build = () =>
      buildApiDocument([...documented, route(ThingsController, 'plain', 'GET', '/v1/things/plain'), route(ThingsController, 'alsoPlain', 'POST', '/v1/things/plain')]);
    expect(build).toThrow(UndocumentedRoutesError);
    expect(build).toThrow('2 routes have no @ApiOperation');
    expect(build).toThrow(/:\n {2}GET \/v1\/things\/plain \(ThingsController\.plain\)\n {2}POST \/v1\/things\/plain \(ThingsController\.alsoPlain\)$/);
  });

  it('refuses a guard it cannot describe', () => {
    expect(() => buildApiDocument([route(OddController, 'get', 'GET', '/v1/odd')])).toThrow(/GET \/v1\/odd is guarded by CustomGuard/);
  });

  it('documents a body by its input shape: a field with a default is optional', () => {
    const create = op('/v1/things', 'post');
    expect(create.requestBody).toEqual({
      required: true,
      content: { 'application/json': { schema: expect.objectContaining({ required: ['name'], additionalProperties: false }) } },
    });
    expect(create.responses['201'].content?.['application/json'].schema).toEqual({ $ref: '#/components/schemas/Thing' });
    expect(create.parameters).toEqual([{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string' } }]);
  });

  it('shares a schema named with .meta({ id }) as one component', () => {
    expect(doc.components.schemas.Thing).toEqual(expect.objectContaining({ required: ['id', 'name', 'size'], additionalProperties: false }));
    expect(op('/v1/things', 'get').responses['200'].content?.['application/json'].schema).toEqual(
      expect.objectContaining({ properties: { data: { type: 'array', items: { $ref: '#/components/schemas/Thing' } } } }),
    );
  });

  it('turns a query schema into parameters, and :id into a path parameter with the id pattern', () => {
    expect(op('/v1/things', 'get').parameters).toEqual([
      { name: 'limit', in: 'query', required: false, description: 'how many', schema: expect.objectContaining({ type: 'integer', maximum: 50, default: 10 }) },
      { name: 'after', in: 'query', required: false, schema: { type: 'string' } },
    ]);
    expect(openApiPath('/v1/things/:id/files/*path')).toBe('/v1/things/{id}/files/{path}');
    expect(op('/v1/things/{id}', 'delete').parameters).toEqual([
      { name: 'id', in: 'path', required: true, description: "the thing's id", schema: { type: 'string', pattern: expect.any(String) } },
    ]);
  });

  it('lists the error codes each route can answer, grouped by status', () => {
    const remove = op('/v1/things/{id}', 'delete');
    expect(Object.keys(remove.responses)).toEqual(['204', '400', '401', '404', '500', '503']);
    expect(remove.responses['204']).toEqual({ description: 'no content' });
    expect(remove.responses['404'].description).toBe('not_found');
    const create = op('/v1/things', 'post');
    expect(create.responses['400'].description).toBe('invalid_json, validation_failed');
    expect(create.responses['409'].content?.['application/json'].schema).toEqual({
      type: 'object',
      required: ['error'],
      properties: { error: { $ref: '#/components/schemas/ErrorBody', properties: { code: { enum: ['conflict'] } } } },
    });
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(['409', '413', '415']));
    expect(op('/v1/admin/things', 'get').responses['403'].description).toBe('forbidden');
  });

  it('names the auth scheme of each route from its guards', () => {
    expect(op('/v1/things', 'get').security).toEqual([{ apiKey: [] }]);
    expect(op('/v1/admin/things', 'get').security).toEqual([{ adminToken: [] }]);
    expect(doc.components.securitySchemes).toEqual({
      apiKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      adminToken: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    expect(op('/v1/admin/things', 'get').tags).toEqual(['admin']);
  });

  it('describes an event stream by the data of each event type', () => {
    const content = op('/v1/things/{id}/events', 'get').responses['200'].content?.['text/event-stream'];
    expect(content?.schema).toEqual({
      description: expect.any(String),
      oneOf: [expect.objectContaining({ title: 'thing.done', properties: expect.objectContaining({ event: { const: 'thing.done' } }) })],
    });
  });

  it('refuses an operation with no response for a route that answers with a body', () => {
    @Controller('v1/x')
    class NoAnswerController {
      @Get()
      @ApiOperation({ summary: 'x' })
      get() {
        return undefined;
      }
    }
    expect(() => buildApiDocument([route(NoAnswerController, 'get', 'GET', '/v1/x')])).toThrow('GET /v1/x: its @ApiOperation has no response, but the route answers 200');
  });
});

describe('the reference page script', () => {
  it('is one self-contained script that parses', () => {
    expect(() => new Function(REFERENCE_SCRIPT)).not.toThrow();
    expect(REFERENCE_SCRIPT).not.toMatch(/require\(|exports\.|import /);
  });
});
