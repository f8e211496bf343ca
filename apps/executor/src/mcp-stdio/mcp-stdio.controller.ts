import { Controller, UseFilters } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  mcpStdioReadContract,
  McpStdioReadReply,
  McpStdioReadRequest,
  mcpStdioStartContract,
  McpStdioStartReply,
  McpStdioStartRequest,
  mcpStdioStopContract,
  McpStdioStopReply,
  McpStdioStopRequest,
  mcpStdioWriteContract,
  McpStdioWriteReply,
  McpStdioWriteRequest,
} from '@app/contracts';
import { AnswersContract, ContractExceptionFilter, ContractRequestPipe } from '@app/messaging';
import { McpStdioHandler } from './mcp-stdio.handler';

/**
 * stdio MCP server processes in sessions' sandboxes. Starting may be answered by any
 * executor (a session without a sandbox yet); the rest only by the session's own.
 */
@Controller()
@UseFilters(ContractExceptionFilter)
export class McpStdioController {
  constructor(private readonly processes: McpStdioHandler) {}

  @AnswersContract(mcpStdioStartContract, 'shared', 'pinned')
  start(@Payload(new ContractRequestPipe(mcpStdioStartContract)) request: McpStdioStartRequest): Promise<McpStdioStartReply> {
    return this.processes.start(request);
  }

  @AnswersContract(mcpStdioWriteContract, 'pinned')
  write(@Payload(new ContractRequestPipe(mcpStdioWriteContract)) request: McpStdioWriteRequest): Promise<McpStdioWriteReply> {
    return this.processes.write(request);
  }

  @AnswersContract(mcpStdioReadContract, 'pinned')
  read(@Payload(new ContractRequestPipe(mcpStdioReadContract)) request: McpStdioReadRequest): Promise<McpStdioReadReply> {
    return this.processes.read(request);
  }

  @AnswersContract(mcpStdioStopContract, 'pinned')
  stop(@Payload(new ContractRequestPipe(mcpStdioStopContract)) request: McpStdioStopRequest): Promise<McpStdioStopReply> {
    return this.processes.stop(request);
  }
}
