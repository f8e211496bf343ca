export * from './logger';
export * from './nest-logger';
export * from './redact-secrets';
export const LOGGER = Symbol('LOGGER');
