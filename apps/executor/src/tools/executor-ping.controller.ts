import { Controller, UseFilters } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { executorPingContract, ExecutorReady } from '@app/contracts';
import { AnswersContract, ContractExceptionFilter, ContractRequestPipe } from '@app/messaging';
import { ExecutorPingHandler } from './executor-ping.handler';

/** The gateway's readiness pings, answered by any one executor. */
@Controller()
@UseFilters(ContractExceptionFilter)
export class ExecutorPingController {
  constructor(private readonly pings: ExecutorPingHandler) {}

  @AnswersContract(executorPingContract, 'shared')
  // The request carries nothing, but like every request it must match its contract.
  ping(@Payload(new ContractRequestPipe(executorPingContract)) _request: object): Promise<ExecutorReady> {
    return this.pings.ping();
  }
}
