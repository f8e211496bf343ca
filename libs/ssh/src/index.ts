export * from './credential-cipher';
export * from './host-key';
export * from './saved-server-connections';
export * from './saved-servers.repository';
export * from './ssh-connection-pool';
export * from './ssh-connector';
