export * from './logger';
export * from './nest-logger';
export * from './redact-secrets';
export * from './process-guards';
export const LOGGER = Symbol('LOGGER');
