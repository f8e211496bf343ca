import { Injectable } from '@nestjs/common';
import { TERMINAL_RUN_EVENTS } from '@app/contracts';
import type { Request, Response } from 'express';
import { isTerminal } from './run-status';
import { RunEventsService } from './run-events.service';
import { RunsService } from './runs.service';

const TERMINAL_EVENTS = new Set<string>(TERMINAL_RUN_EVENTS);
const KEEPALIVE_MS = 15_000;

/**
 * A run's events as server-sent events: every stored event after `after`, then live ones
 * until the run's terminal event. Events come from Postgres, so a late or reconnecting
 * client gets the whole run; a NATS notice only wakes the stream early.
 */
@Injectable()
export class RunEventStream {
  constructor(
    private readonly runs: RunsService,
    private readonly events: RunEventsService,
  ) {}

  /** Answers 404 (before any header is sent) for a run the tenant cannot see. */
  async send(tenantId: string, runId: string, after: number, req: Request, res: Response): Promise<void> {
    await this.runs.get(tenantId, runId);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.flushHeaders();

    let closed = false;
    let ended = false;
    let wake: () => void = () => undefined;
    req.on('close', () => {
      closed = true;
      wake();
    });
    const subscription = this.events.watch(runId, () => wake());
    try {
      while (!closed) {
        const batch = await this.events.after(tenantId, runId, after);
        let finished = false;
        for (const event of batch) {
          res.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`);
          after = event.seq;
          if (TERMINAL_EVENTS.has(event.type)) finished = true;
        }
        if (finished) break;
        if (batch.length > 0) continue;
        // Resumed at or past the terminal event: nothing more will come. The run may have
        // ended just after the read above, so its events are read once more before closing.
        if (ended) break;
        if (isTerminal((await this.runs.get(tenantId, runId)).status)) {
          ended = true;
          continue;
        }
        const notified = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), KEEPALIVE_MS);
          wake = () => {
            clearTimeout(timer);
            resolve(true);
          };
        });
        if (!notified && !closed) res.write(': keepalive\n\n');
      }
    } finally {
      subscription.unsubscribe();
      res.end();
    }
  }
}
