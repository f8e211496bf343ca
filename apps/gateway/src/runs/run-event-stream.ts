import { Injectable } from '@nestjs/common';
import { TERMINAL_RUN_EVENTS } from '@app/contracts';
import { AppError } from '@app/errors';
import type { Request, Response } from 'express';
import { isTerminal } from './run-status';
import { RunEventsService } from './run-events.service';

const TERMINAL_EVENTS = new Set<string>(TERMINAL_RUN_EVENTS);
const KEEPALIVE_MS = 15_000;
/** Events sent per read; a full batch is followed by another read at once. */
const BATCH = 500;

/**
 * A run's events as server-sent events: every stored event after `after`, then live ones
 * until the run's terminal event. Events come from Postgres, so a late or reconnecting
 * client gets the whole run; a NATS notice only wakes the stream early.
 */
@Injectable()
export class RunEventStream {
  constructor(private readonly events: RunEventsService) {}

  /** Answers 404 (before any header is sent) for a run the tenant cannot see. */
  async send(tenantId: string, runId: string, after: number, req: Request, res: Response): Promise<void> {
    let closed = false;
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
    // The subscription reaches the server before the first read, so an event stored after
    // that read is always announced to this stream. (The run id has the shape of an id, so
    // the subject is never a wildcard.)
    const subscription = this.events.watch(runId, notice);
    let started = false;
    try {
      await this.events.watching();
      while (!closed) {
        // Each read has the run's status with its events, as of one moment: a run that has
        // ended comes with all of its events, so no second look is needed before closing.
        const read = await this.events.read(tenantId, runId, after, BATCH);
        if (!read) {
          if (!started) throw AppError.notFound('run', runId);
          break; // the run was deleted with its session
        }
        if (!started) {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
          res.flushHeaders();
          started = true;
        }
        let finished = false;
        for (const event of read.events) {
          res.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`);
          after = event.seq;
          if (TERMINAL_EVENTS.has(event.type)) finished = true;
        }
        if (finished) break;
        if (read.events.length === BATCH) continue;
        // Resumed at or past the terminal event: nothing more will come.
        if (isTerminal(read.status)) break;
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
      if (started) res.end();
    }
  }
}
