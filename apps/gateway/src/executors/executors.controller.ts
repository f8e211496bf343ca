import { Controller, Get, HttpCode, Inject, Post, UseGuards } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { AppError, ErrorCode } from '@app/errors';
import { z } from 'zod';
import { ApiOperation, listOf } from '../api-docs/api-operation';
import { AdminGuard } from '../auth/admin.guard';
import { ValidParam } from '../common/validation/request-parts';
import { ExecutorAnnouncements } from './executor-announcements';
import { ExecutorRegistry, ExecutorView } from './executor-registry';
import { ExecutorSandboxesRepository } from './executor-sandboxes.repository';

/** An executor id as RUNBOX_EXECUTOR_ID names it (its pinned NATS subjects carry it, so no dots or wildcards). */
const executorIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, 'an executor id: letters, digits, - and _ (up to 128)');

export const executorSchema = z.object({
  id: z.string(),
  state: z.enum(['ready', 'draining', 'decommissioned']).describe('what the executor announces'),
  standing: z.enum(['serving', 'lost', 'gone']).describe('what this gateway makes of it'),
  capacity: z.number().int(),
  sandboxes: z.number().int(),
  warm_pool: z.number().int(),
  version: z.string(),
  last_seen_ms: z.number().describe('milliseconds since it was last heard from'),
}).meta({ id: 'Executor' });
const decommissionedSchema = z.object({
  executor_id: z.string(),
  decommissioned: z.literal(true),
  sessions: z.number().int().describe('its sessions, released at once'),
  on_loss: z.enum(['fail', 'recreate']).describe('what happens to them (RUNBOX_ON_EXECUTOR_LOSS)'),
});

/** The operator's view of the executors (/v1/admin/executors), and their decommissioning. */
@Controller('v1/admin/executors')
@UseGuards(AdminGuard)
export class ExecutorsController {
  constructor(
    private readonly registry: ExecutorRegistry,
    private readonly announcements: ExecutorAnnouncements,
    private readonly sandboxes: ExecutorSandboxesRepository,
    @Inject(RUNBOX_CONFIG) private readonly config: RunboxConfig,
  ) {}

  /** The executors this gateway hears from, with their room and standing. */
  @Get()
  @ApiOperation({ summary: 'The executors this gateway hears from, with their room and standing', response: listOf(executorSchema) })
  list() {
    return { data: this.registry.list().map(executorJson) };
  }

  /**
   * Takes the executor out of service for good: it takes no new session, and its sessions
   * are released at once per RUNBOX_ON_EXECUTOR_LOSS (`fail`: their calls fail;
   * `recreate`: their next call starts an empty sandbox elsewhere). An executor nobody has
   * heard of and that holds no sandbox is a 404.
   */
  @Post(':id/decommission')
  @HttpCode(200)
  @ApiOperation({ summary: 'Take an executor out of service for good', response: decommissionedSchema, errors: [ErrorCode.NotFound] })
  async decommission(@ValidParam('id', executorIdSchema) id: string) {
    const sessions = await this.sandboxes.countLive(id);
    if (sessions === 0 && !this.registry.list().some((e) => e.id === id)) throw AppError.notFound('executor', id);
    this.announcements.decommission(id);
    return { executor_id: id, decommissioned: true, sessions, on_loss: this.config.RUNBOX_ON_EXECUTOR_LOSS };
  }
}

function executorJson(e: ExecutorView): z.output<typeof executorSchema> {
  return {
    id: e.id,
    state: e.state,
    standing: e.standing,
    capacity: e.capacity,
    sandboxes: e.sandboxes,
    warm_pool: e.warmPool,
    version: e.version,
    last_seen_ms: e.lastSeenMs,
  };
}
