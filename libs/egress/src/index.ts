export * from './address-class';
export * from './checked-request';
export * from './domain-rules';
export * from './egress-guard';
export * from './guarded-fetch';
export * from './tenant-egress-rules';
export * from './guarded-websocket';
