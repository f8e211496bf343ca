export * from './config.schema';
export * from './load-config';
export * from './database-pools';
export * from './config.module';
