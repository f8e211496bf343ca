export * from './logger';
export * from './nest-logger';
export const LOGGER = Symbol('LOGGER');
