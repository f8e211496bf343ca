import { Module } from '@nestjs/common';
import { ServersModule } from '../servers/servers.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { ToolsModule } from '../tools/tools.module';
import { WebModule } from '../web/web.module';
import { SessionReleaseHooks } from './session-release-hooks';
import { SessionsController } from './sessions.controller';
import { SessionsRepository } from './sessions.repository';
import { SessionsService } from './sessions.service';

/**
 * Sessions: their rows and messages, and the /v1/sessions API (direct tool calls included).
 * Deleting one cancels its runs through SessionRunsCanceller, which the gateway module binds,
 * and runs the SessionReleaseHooks that features holding per-session resources registered.
 */
@Module({
  imports: [TenancyModule, ToolsModule, ServersModule, WebModule],
  controllers: [SessionsController],
  providers: [SessionsRepository, SessionsService, SessionReleaseHooks],
  exports: [SessionsRepository, SessionReleaseHooks],
})
export class SessionsModule {}
