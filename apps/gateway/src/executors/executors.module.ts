import { Module } from '@nestjs/common';
import { RUNBOX_CONFIG, RunboxConfig } from '@app/config';
import { ExecutorAnnouncements } from './executor-announcements';
import { ExecutorRegistry } from './executor-registry';
import { ExecutorSandboxesRepository } from './executor-sandboxes.repository';
import { ExecutorsController } from './executors.controller';

/** The executors this gateway knows of, from their announcements: for placement, loss and the admin view. */
@Module({
  controllers: [ExecutorsController],
  providers: [
    {
      provide: ExecutorRegistry,
      inject: [RUNBOX_CONFIG],
      useFactory: (c: RunboxConfig) => new ExecutorRegistry(c.RUNBOX_EXECUTOR_LOSS_GRACE_SECONDS * 1000, c.RUNBOX_EXECUTOR_HEARTBEAT_SECONDS * 1000),
    },
    ExecutorAnnouncements,
    ExecutorSandboxesRepository,
  ],
  exports: [ExecutorRegistry, ExecutorAnnouncements],
})
export class ExecutorsModule {}
