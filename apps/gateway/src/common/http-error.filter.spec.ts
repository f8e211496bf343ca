import { ContractViolationError } from '@app/messaging';
import { ErrorCode, NatsError } from 'nats';
import type { Response } from 'express';
import pino from 'pino';
import { HttpErrorFilter } from './http-error.filter';

/** Just enough of an Express response to see what the filter answered. */
function fakeResponse() {
  const sent: { status?: number; body?: { error: Record<string, unknown> } } = {};
  const res = {
    headersSent: false,
    setHeader: () => res,
    status: (code: number) => {
      sent.status = code;
      return res;
    },
    json: (body: { error: Record<string, unknown> }) => {
      sent.body = body;
      return res;
    },
  };
  return { res: res as unknown as Response, sent };
}

describe('HttpErrorFilter', () => {
  const filter = new HttpErrorFilter(pino({ level: 'silent' }));

  it('answers a message that broke its NATS contract as a 500 with an error id, never as a 400 naming the body', () => {
    const { res, sent } = fakeResponse();
    filter.reply(new ContractViolationError('runbox.executor.tool.call.v1', 'reply', 'executor_id: Required'), res);
    expect(sent.status).toBe(500);
    expect(sent.body?.error.code).toBe('internal_error');
    expect(sent.body?.error.message).toMatch(/^internal error \(error id [0-9a-f-]{36}\)$/);
    expect(JSON.stringify(sent.body)).not.toContain('body.');
  });

  it('answers 503 with Retry-After while Postgres or NATS is away, rather than a 500', () => {
    const headers: Record<string, string> = {};
    for (const cause of [new Error('connect ECONNREFUSED 127.0.0.1:5432'), NatsError.errorForCode(ErrorCode.Disconnect)]) {
      const { res, sent } = fakeResponse();
      (res as unknown as { setHeader: (k: string, v: string) => void }).setHeader = (k, v) => (headers[k] = v);
      filter.reply(cause, res);
      expect(sent.status).toBe(503);
      expect(sent.body?.error.code).toBe('service_unavailable');
      expect(sent.body?.error.message).toMatch(/is unavailable; try again shortly$/);
      expect(headers['Retry-After']).toBe('5');
    }
  });
});
