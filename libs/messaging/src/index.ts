export * from './json-codec';
export * from './nats-client';
export const NATS_CLIENT = Symbol('NATS_CLIENT');
