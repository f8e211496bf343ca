import { Controller, UseFilters } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { workspaceFilesContract, WorkspaceFilesReply, WorkspaceFilesRequest } from '@app/contracts';
import { AnswersContract, ContractExceptionFilter, ContractRequestPipe } from '@app/messaging';
import { WorkspaceFilesHandler } from './workspace-files.handler';

/** Workspace files over HTTP: any executor for a session with no sandbox yet, else the session's own. */
@Controller()
@UseFilters(ContractExceptionFilter)
export class WorkspaceFilesController {
  constructor(private readonly files: WorkspaceFilesHandler) {}

  @AnswersContract(workspaceFilesContract, 'shared', 'pinned')
  handle(@Payload(new ContractRequestPipe(workspaceFilesContract)) request: WorkspaceFilesRequest): Promise<WorkspaceFilesReply> {
    return this.files.handle(request);
  }
}
