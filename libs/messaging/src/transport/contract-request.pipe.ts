import { PipeTransform } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { RequestContract } from '@app/contracts';
import { describeIssues } from '../nats-client';

/**
 * Validates a request against its contract, filling in defaults; an invalid one is answered
 * (by the ContractExceptionFilter) with the contract's error reply, code `bad_request`.
 */
export class ContractRequestPipe<Req, ReqInput> implements PipeTransform<unknown, Req> {
  constructor(private readonly contract: RequestContract<Req, unknown, ReqInput>) {}

  transform(value: unknown): Req {
    const parsed = this.contract.request.safeParse(value);
    if (!parsed.success) throw new RpcException({ code: 'bad_request', message: describeIssues(parsed.error) });
    return parsed.data;
  }
}
