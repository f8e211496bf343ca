export * from './logger';
export * from './nest-logger';
export * from './redact-secrets';
export * from './process-guards';
export * from './request-id';
export const LOGGER = Symbol('LOGGER');
