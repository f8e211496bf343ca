import { Controller, UseFilters } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { SessionRelease, sessionReleaseContract, SessionReleaseReply } from '@app/contracts';
import { AnswersContract, ContractExceptionFilter, ContractRequestPipe } from '@app/messaging';
import { SessionReleaseHandler } from './session-release.handler';

/** A deleted session's sandbox, released by any executor or by the one the session is pinned to. */
@Controller()
@UseFilters(ContractExceptionFilter)
export class SessionReleaseController {
  constructor(private readonly sessions: SessionReleaseHandler) {}

  @AnswersContract(sessionReleaseContract, 'shared', 'pinned')
  release(@Payload(new ContractRequestPipe(sessionReleaseContract)) request: SessionRelease): Promise<SessionReleaseReply> {
    return this.sessions.release(request);
  }
}
