import type Docker from 'dockerode';

/** Path words that name an action (`/containers/{id}/start`); anything else in that place is an id or a name. */
const ACTIONS = new Set([
  'archive',
  'attach',
  'changes',
  'create',
  'exec',
  'export',
  'json',
  'kill',
  'logs',
  'pause',
  'prune',
  'resize',
  'restart',
  'start',
  'stats',
  'stop',
  'top',
  'unpause',
  'update',
  'wait',
]);

/** Resources the executor's engine calls address; others are counted as `other`. */
const RESOURCES = new Set(['_ping', 'containers', 'exec', 'images', 'info', 'networks', 'version', 'volumes', 'events', 'system']);

/**
 * A Docker API call's operation, for a metrics label: the method and the path with ids
 * and names taken out (`POST /containers/:id/start`), so the label set stays small
 * whatever the ids, image names or query strings.
 */
export function dockerOperation(rawMethod: string, path: string): string {
  const method = /^[A-Za-z]{1,10}$/.test(rawMethod) ? rawMethod.toUpperCase() : 'OTHER';
  const segments = path.split('?')[0].split('/').filter(Boolean);
  if (/^v\d+(\.\d+)?$/.test(segments[0] ?? '')) segments.shift();
  const [resource, ...rest] = segments;
  if (resource === undefined) return `${method} /`;
  if (!RESOURCES.has(resource)) return `${method} /other`;
  const last = rest[rest.length - 1];
  const parts = [resource];
  if (rest.length === 1) parts.push(ACTIONS.has(rest[0]) ? rest[0] : ':id');
  else if (rest.length > 1) parts.push(':id', ACTIONS.has(last) ? last : ':part');
  return `${method} /${parts.join('/')}`;
}

/** What the engine's client reports of each call. */
export type DockerCallObserver = (operation: string, seconds: number, failed: boolean) => void;

interface DialOptions {
  method?: string;
  path?: string;
}
type DialCallback = (err: unknown, data?: unknown) => void;
interface Modem {
  dial(options: DialOptions, callback: DialCallback): unknown;
}

/**
 * Times every call `docker` makes to the engine. dockerode sends each one through its
 * modem's `dial` (containers, execs, volumes, pings alike), so wrapping that one method
 * covers them all. A streamed or hijacked call counts until the engine answered its
 * request, not until its stream ends.
 */
export function timeDockerApi(docker: Docker, observe: DockerCallObserver): Docker {
  const modem = docker.modem as unknown as Modem;
  const dial = modem.dial.bind(modem);
  modem.dial = (options: DialOptions, callback: DialCallback) => {
    const operation = dockerOperation(options.method ?? 'GET', options.path ?? '/');
    const started = performance.now();
    return dial(options, (err, data) => {
      observe(operation, (performance.now() - started) / 1000, !!err);
      callback(err, data);
    });
  };
  return docker;
}
