export * from './test-database';
export * from './test-nats';
export * from './scripted-model';
export * from './test-docker';
export * from './test-services';
export * from './toolsets';
export * from './test-sshd';
export * from './test-nats-cluster';
