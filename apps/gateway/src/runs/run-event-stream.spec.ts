import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { RunEventStream } from './run-event-stream';
import type { RunEventView } from './run-events.repository';
import type { RunEventsService } from './run-events.service';
import type { RunsService } from './runs.service';
import type { RunView } from './runs.repository';

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
    let onNotice: () => void = () => undefined;
    let statusReads = 0;
    const runs = {
      // The stream's status check is where the run ends: its last event is stored and
      // announced after the stream's read found nothing and before it starts to wait.
      get: async () => {
        statusReads++;
        if (statusReads === 2) {
          stored = [completed];
          onNotice();
        }
        return { id: RUN, status: 'running' } as RunView;
      },
    } as unknown as RunsService;
    const events = {
      watch: (_runId: string, notice: () => void) => {
        onNotice = notice;
        return { unsubscribe: () => undefined };
      },
      watching: async () => undefined,
      after: async (_tenantId: string, _runId: string, seq: number) => stored.filter((e) => e.seq > seq),
    } as unknown as RunEventsService;
    const { res, written, ended } = fakeResponse();

    const sending = new RunEventStream(runs, events).send(TENANT, RUN, 1, new EventEmitter() as unknown as Request, res);
    // No timer moves: only the notice can wake the stream.
    for (let i = 0; i < 20 && !ended(); i++) await new Promise((resolve) => setImmediate(resolve));

    expect(ended()).toBe(true);
    expect(written.join('')).toContain('event: run.completed');
    await sending;
  });
});
