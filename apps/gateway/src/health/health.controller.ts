import { Controller, Get, Inject, Res } from '@nestjs/common';
import { NATS_CLIENT, NatsClient } from '@app/messaging';
import { PrismaService } from '@app/persistence';
import type { Response } from 'express';
import { z } from 'zod';
import { ApiOperation } from '../api-docs/api-operation';
import { ExecutorClient } from '../tools/executor.client';

const readinessSchema = z.object({
  status: z.enum(['ready', 'not_ready']),
  checks: z.object({ postgres: z.enum(['ok', 'down']), nats: z.enum(['ok', 'down']), executor: z.enum(['ok', 'down', 'docker_down']) }),
});

@Controller()
export class HealthController {
  constructor(
    private readonly db: PrismaService,
    private readonly executor: ExecutorClient,
    @Inject(NATS_CLIENT) private readonly nats: NatsClient,
  ) {}

  /** Liveness: the process answers. */
  @Get('healthz')
  @ApiOperation({ summary: 'Liveness: the process answers', response: z.object({ status: z.literal('ok') }) })
  healthz() {
    return { status: 'ok' };
  }

  /** Readiness: Postgres, NATS and at least one executor (with its Docker engine) answer. */
  @Get('readyz')
  @ApiOperation({
    summary: 'Readiness: Postgres, NATS and at least one executor (with its Docker engine) answer',
    description: 'Not ready is a 503 whose body has the same checks, and an `error` naming what is down.',
    response: readinessSchema,
  })
  async readyz(@Res() res: Response): Promise<void> {
    const natsUp = await this.nats.ping();
    const [postgres, executor] = await Promise.all([this.db.ping(), natsUp ? this.executor.ping() : Promise.resolve(null)]);
    const checks = {
      postgres: postgres ? 'ok' : 'down',
      nats: natsUp ? 'ok' : 'down',
      executor: executor === null ? 'down' : executor.docker ? 'ok' : 'docker_down',
    };
    const ready = Object.values(checks).every((v) => v === 'ok');
    if (ready) {
      res.status(200).json({ status: 'ready', checks });
      return;
    }
    const down = Object.entries(checks).filter(([, v]) => v !== 'ok').map(([k]) => k);
    res.status(503).json({ status: 'not_ready', checks, error: { code: 'service_unavailable', message: `not ready: ${down.join(', ')} down` } });
  }
}
