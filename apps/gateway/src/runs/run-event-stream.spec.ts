import { ErrorCode } from '@app/errors';
import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { RunEventStream } from './run-event-stream';
import type { RunEventsRead, RunEventView } from './run-events.repository';
import type { RunEventsService } from './run-events.service';

const TENANT = 'ten_1';
const RUN = 'run_1';

/** A response that records what was written and whether it was ended. */
function fakeResponse() {
  const written: string[] = [];
  let ended = false;
  const res = {
    writeHead: () => res,
    flushHeaders: () => undefined,
    write: (chunk: string) => written.push(chunk),
    end: () => {
      ended = true;
    },
  };
  return { res: res as unknown as Response, written, ended: () => ended };
}

describe('RunEventStream', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] }));
  afterEach(() => jest.useRealTimers());

  it('sends an event announced while it was reading, not waiting, without waiting for the keepalive', async () => {
    const completed: RunEventView = { seq: 2, type: 'run.completed', data: { output: 'done' }, createdAt: new Date() };
    let stored: RunEventView[] = [];
    let status: RunEventsRead['status'] = 'running';
    let onNotice: () => void = () => undefined;
    let reads = 0;
    const events = {
      watch: (_runId: string, notice: () => void) => {
        onNotice = notice;
        return { unsubscribe: () => undefined };
      },
      watching: async () => undefined,
      // The run ends while the stream's first read is on its way: its read found the run
      // running with nothing new, and the last event is stored and announced before the
      // stream starts to wait.
      read: async (_tenantId: string, _runId: string, seq: number): Promise<RunEventsRead> => {
        const result = { status, events: stored.filter((e) => e.seq > seq) };
        if (++reads === 1) {
          stored = [completed];
          status = 'completed';
          onNotice();
        }
        return result;
      },
    } as unknown as RunEventsService;
    const { res, written, ended } = fakeResponse();

    const sending = new RunEventStream(events).send(TENANT, RUN, 1, new EventEmitter() as unknown as Request, res);
    // No timer moves: only the notice can wake the stream.
    for (let i = 0; i < 20 && !ended(); i++) await new Promise((resolve) => setImmediate(resolve));

    expect(ended()).toBe(true);
    expect(written.join('')).toContain('event: run.completed');
    await sending;
  });

  it('ends at once for a run that ended before the position it resumes from', async () => {
    const events = {
      watch: () => ({ unsubscribe: () => undefined }),
      watching: async () => undefined,
      read: async (): Promise<RunEventsRead> => ({ status: 'completed', events: [] }),
    } as unknown as RunEventsService;
    const { res, written, ended } = fakeResponse();

    await new RunEventStream(events).send(TENANT, RUN, 5, new EventEmitter() as unknown as Request, res);
    expect(ended()).toBe(true);
    expect(written).toEqual([]);
  });

  it('answers 404, with no header sent and its subscription closed, for a run the tenant does not have', async () => {
    let unsubscribed = false;
    const events = {
      watch: () => ({ unsubscribe: () => (unsubscribed = true) }),
      watching: async () => undefined,
      read: async () => null,
    } as unknown as RunEventsService;
    const res = { writeHead: jest.fn(), flushHeaders: jest.fn(), write: jest.fn(), end: jest.fn() } as unknown as Response;

    await expect(new RunEventStream(events).send(TENANT, RUN, 0, new EventEmitter() as unknown as Request, res)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(res.writeHead).not.toHaveBeenCalled();
    expect(unsubscribed).toBe(true);
  });
});
