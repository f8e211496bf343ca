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
    // A notice that comes while the stream is reading, not waiting, must not be lost: it
    // is kept until the next wait, which then reads again at once instead of sleeping
    // until the keepalive with the run's last events unsent.
    let noticed = false;
    let wake: () => void = () => undefined;
    const notice = () => {
      noticed = true;
      wake();
    };
    req.on('close', () => {
      closed = true;
      notice();
    });
    const subscription = this.events.watch(runId, notice);
    try {
      // The server has the subscription before the first read, so an event stored after
      // that read is always announced to this stream.
      await this.events.watching();
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
        const notified =
          noticed ||
          (await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), KEEPALIVE_MS);
            wake = () => {
              clearTimeout(timer);
              resolve(true);
            };
          }));
        noticed = false;
        wake = () => undefined;
        if (!notified && !closed) res.write(': keepalive\n\n');
      }
    } finally {
      subscription.unsubscribe();
      res.end();
    }
  }
}
