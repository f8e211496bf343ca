import { Controller, Get, HttpCode, Inject, Param, PipeTransform, Post, UseGuards } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { AppError, ErrorCode } from '@app/errors';
import { AdminGuard } from '../auth/admin.guard';
import { ExecutorAnnouncements } from './executor-announcements';
import { ExecutorRegistry, ExecutorView } from './executor-registry';
import { ExecutorSandboxesRepository } from './executor-sandboxes.repository';

/** What RUNBOX_EXECUTOR_ID may be: the executor's pinned subjects carry it. */
const EXECUTOR_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

class ExecutorIdPipe implements PipeTransform<string, string> {
  transform(id: string): string {
    if (!EXECUTOR_ID.test(id)) throw new AppError(ErrorCode.NotFound, 'executor not found (not a valid id)');
    return id;
  }
}

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
  async decommission(@Param('id', new ExecutorIdPipe()) id: string) {
    const sessions = await this.sandboxes.countLive(id);
    if (sessions === 0 && !this.registry.list().some((e) => e.id === id)) throw AppError.notFound('executor', id);
    this.announcements.decommission(id);
    return { executor_id: id, decommissioned: true, sessions, on_loss: this.config.RUNBOX_ON_EXECUTOR_LOSS };
  }
}

function executorJson(e: ExecutorView) {
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
