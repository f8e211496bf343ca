import { BaseRpcContext } from '@nestjs/microservices';
import { RpcError } from '@app/contracts';

/** What a request handler (and the exception filter) may know about the message it handles. */
export class ContractContext extends BaseRpcContext<[subject: string, errorReply: (error: RpcError) => unknown]> {
  /** The subject the message came on (a pinned subject carries the responder's id). */
  get subject(): string {
    return this.args[0];
  }

  /** The contract's error reply, naming this responder: what the exception filter answers with. */
  errorReply(error: RpcError): unknown {
    return this.args[1](error);
  }
}
