import { Controller, UseFilters } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { ToolCallReply, toolCallContract, ToolCancel, toolCancelContract } from '@app/contracts';
import { AnswersContract, ContractExceptionFilter, ContractRequestPipe, ReceivesEvent } from '@app/messaging';
import { ReceivedToolCall, ToolCallHandler } from './tool-call.handler';

/** Tool calls from the gateway: a new session's on the shared subject, a pinned session's on this executor's own. */
@Controller()
@UseFilters(ContractExceptionFilter)
export class ToolCallController {
  constructor(private readonly toolCalls: ToolCallHandler) {}

  @AnswersContract(toolCallContract, 'shared', 'pinned')
  call(@Payload(new ContractRequestPipe(toolCallContract)) request: ReceivedToolCall): Promise<ToolCallReply> {
    return this.toolCalls.handle(request);
  }

  @ReceivesEvent(toolCancelContract)
  cancel(@Payload() message: ToolCancel): Promise<void> {
    return this.toolCalls.cancel(message);
  }
}
