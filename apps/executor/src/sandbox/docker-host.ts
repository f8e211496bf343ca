import type { DockerOptions } from 'dockerode';

/**
 * Where the executor's Docker engine listens, from DOCKER_HOST as the Docker CLI reads it
 * (`unix:///run/docker.sock`, `tcp://host:2375`); unset, dockerode's default local socket.
 * Parsed here rather than left to dockerode, so each executor (several share one process
 * in tests) talks to the engine its own configuration names.
 */
export function dockerOptionsFor(dockerHost: string | undefined): DockerOptions {
  if (!dockerHost) return { socketPath: '/var/run/docker.sock' };
  if (dockerHost.startsWith('unix://')) return { socketPath: dockerHost.slice('unix://'.length) };
  const url = new URL(dockerHost);
  return { protocol: 'http', host: url.hostname, port: Number(url.port || 2375) };
}
