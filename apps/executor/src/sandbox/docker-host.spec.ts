import { dockerOptionsFor } from './docker-host';

describe('dockerOptionsFor', () => {
  it('reads a unix socket, a tcp address, and falls back to the local socket', () => {
    expect(dockerOptionsFor('unix:///tmp/engine-2/docker.sock')).toEqual({ socketPath: '/tmp/engine-2/docker.sock' });
    expect(dockerOptionsFor('tcp://127.0.0.1:2376')).toEqual({ protocol: 'http', host: '127.0.0.1', port: 2376 });
    expect(dockerOptionsFor(undefined)).toEqual({ socketPath: '/var/run/docker.sock' });
  });
});
