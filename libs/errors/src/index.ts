export * from './error-code';
export * from './app-error';
export * from './zod-error';
