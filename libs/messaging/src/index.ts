export * from './json-codec';
export * from './nats-client';
export * from './large-message';
export const NATS_CLIENT = Symbol('NATS_CLIENT');
export * from './transport';
export * from './nats-unavailable';
export * from './byte-stream';
