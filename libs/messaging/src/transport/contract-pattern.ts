import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { EventContract, RequestContract } from '@app/contracts';

/**
 * Where a responder listens for a contract's requests:
 * - `shared`: the contract's subject in the responders' queue group, one of them answers;
 * - `pinned`: the contract's subject with this responder's own id appended, chosen at run
 *   time once the id is known (a session's executor);
 * - `every`: the contract's subject without a queue group, every responder hears it.
 */
export type ContractRoute = 'shared' | 'pinned' | 'every';

/** A handler's pattern: the subject and route; the contract itself rides in the handler's extras. */
export type ContractPattern = {
  readonly subject: string;
  readonly route: ContractRoute;
};

/** A contract with its types erased: the transport only moves and checks its messages. */
export type AnyRequestContract = RequestContract<unknown, unknown, unknown>;
export type AnyEventContract = EventContract<unknown>;

export type ContractExtras = { readonly contract: AnyRequestContract } | { readonly contract: AnyEventContract };

/**
 * Answers the contract's requests on each of `routes` (a `@MessagePattern` per route). The
 * reply is checked against the contract by the transport; pair it with
 * `@Payload(new ContractRequestPipe(contract))` and the `ContractExceptionFilter`.
 */
export function AnswersContract<Req, Rep, ReqInput>(contract: RequestContract<Req, Rep, ReqInput>, ...routes: Array<'shared' | 'pinned'>): MethodDecorator {
  const patterns: ContractPattern[] = routes.map((route) => ({ subject: contract.subject, route }));
  const extras: ContractExtras = { contract: contract as unknown as AnyRequestContract };
  return MessagePattern(patterns, extras);
}

/** Receives the contract's events, as every responder (no queue group); the transport validates them. */
export function ReceivesEvent<T>(contract: EventContract<T>): MethodDecorator {
  const pattern: ContractPattern = { subject: contract.subject, route: 'every' };
  const extras: ContractExtras = { contract: contract as unknown as AnyEventContract };
  return EventPattern(pattern, extras);
}
