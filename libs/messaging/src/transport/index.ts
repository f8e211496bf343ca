export * from './contract-context';
export * from './contract-exception.filter';
export * from './contract-pattern';
export * from './contract-request.pipe';
export * from './nats-contract.server';
export * from './nats-contract.client';
