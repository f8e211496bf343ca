import { Module } from '@nestjs/common';
import { ServersModule } from '../servers/servers.module';
import { SessionsModule } from '../sessions/sessions.module';
import { TenancyModule } from '../tenants/tenancy.module';
import { WorkspaceFilesController } from './workspace-files.controller';
import { WorkspaceFilesService } from './workspace-files.service';

/** /v1/sessions/{id}/files/... and /archive: workspace files over HTTP, streamed through the session's executor. */
@Module({
  imports: [TenancyModule, SessionsModule, ServersModule],
  controllers: [WorkspaceFilesController],
  providers: [WorkspaceFilesService],
})
export class FilesModule {}
