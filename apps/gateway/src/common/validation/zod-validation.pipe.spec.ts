import { Controller, Get, Post } from '@nestjs/common';
import { AppError } from '@app/errors';
import { z } from 'zod';
import { PathIdPipe } from './path-id.pipe';
import { PathId, ValidBody, ValidHeader, ValidParam, ValidQuery } from './request-parts';
import { routeParts } from './route-catalogue';
import { ZodValidationPipe } from './zod-validation.pipe';

const failure = (run: () => unknown): AppError => {
  try {
    run();
  } catch (err) {
    return err as AppError;
  }
  throw new Error('accepted');
};

describe('ZodValidationPipe', () => {
  const schema = z.object({ input: z.string().max(5), metadata: z.record(z.string(), z.unknown()).optional() }).strict();

  it('returns what the schema parsed', () => {
    expect(new ZodValidationPipe(schema, 'body').transform({ input: 'hi' })).toEqual({ input: 'hi' });
  });

  it('names each bad field under its request part', () => {
    const err = failure(() => new ZodValidationPipe(schema, 'body').transform({ input: 'toolong', x: 1 }));
    expect(err.code).toBe('validation_failed');
    expect(err.message).toMatch(/^body\.input: .*; body: Unrecognized key: "x"$/);
  });

  it('refuses NUL and lone surrogates anywhere, free-form values and keys included, before the schema', () => {
    const pipe = new ZodValidationPipe(schema, 'body');
    expect(failure(() => pipe.transform({ input: 'a\u0000' })).message).toMatch(/^body\.input: contains a NUL character/);
    expect(failure(() => pipe.transform({ input: 'ok', metadata: { deep: [{ x: '\ud800' }] } })).details).toEqual({
      issues: [{ field: 'body.metadata.deep.0.x', message: expect.stringMatching(/lone surrogate \(U\+D800\)/) }],
    });
    expect(failure(() => pipe.transform({ input: 'ok', metadata: { 'k\u0000': 1 } })).message).toMatch(/^body\.metadata: a key contains a NUL/);
    // Even where the schema would also refuse the value, the unstorable text is named first.
    expect(failure(() => pipe.transform({ input: 'much too long\u0000' })).message).toMatch(/NUL/);
  });

  it('stands an absent part, or a JSON null where allowed, for a default value', () => {
    const empty = z.object({}).strict();
    expect(new ZodValidationPipe(empty, 'body', { absent: {} }).transform(undefined)).toEqual({});
    expect(failure(() => new ZodValidationPipe(empty, 'body', { absent: {} }).transform(null)).message).toMatch(/^body: /);
    expect(new ZodValidationPipe(empty, 'body', { absent: {}, nullIsAbsent: true }).transform(null)).toEqual({});
  });
});

describe('PathIdPipe', () => {
  it('passes a well-formed id and answers anything else 404 without echoing it', () => {
    expect(new PathIdPipe('run').transform('run_abcdefgh12')).toBe('run_abcdefgh12');
    const err = failure(() => new PathIdPipe('run').transform('%FF\u0000secret'));
    expect([err.code, err.message]).toEqual(['not_found', 'run not found (not a valid id)']);
  });
});

describe('routeParts', () => {
  const body = z.object({ a: z.string() });
  const query = z.object({ q: z.string().optional() });
  const name = z.string();
  const header = z.string().optional();

  @Controller('things')
  class ThingsController {
    @Post(':id/:name')
    act(@PathId('thing') _id: string, @ValidParam('name', name) _name: string, @ValidBody(body) _body: unknown, @ValidHeader('x-h', header) _h: string) {
      return undefined;
    }

    @Get()
    list(@ValidQuery(query) _query: unknown) {
      return undefined;
    }

    @Get('plain')
    plain() {
      return undefined;
    }
  }

  it('reads every schema a handler declares from its parameter decorators', () => {
    const act = routeParts(ThingsController, 'act');
    expect(act.body?.schema).toBe(body);
    expect(act.params).toEqual({ name });
    expect(act.ids).toEqual({ id: 'thing' });
    expect(act.headers).toEqual({ 'x-h': header });
    expect(act.query).toBeUndefined();
    expect(routeParts(ThingsController, 'list').query).toBe(query);
    expect(routeParts(ThingsController, 'plain')).toEqual({ params: {}, ids: {}, headers: {} });
  });
});
