import { dockerOperation } from './docker-api-timing';

describe('dockerOperation', () => {
  it('keeps the resource and action and takes out ids, names and queries', () => {
    expect(dockerOperation('POST', '/containers/create?name=runbox-ten_x-ses_y')).toBe('POST /containers/create');
    expect(dockerOperation('POST', '/containers/4f2a9c1b/start?')).toBe('POST /containers/:id/start');
    expect(dockerOperation('GET', '/containers/4f2a9c1b/json')).toBe('GET /containers/:id/json');
    expect(dockerOperation('DELETE', '/containers/4f2a9c1b?force=true&v=true')).toBe('DELETE /containers/:id');
    expect(dockerOperation('POST', '/exec/abc123/start')).toBe('POST /exec/:id/start');
    expect(dockerOperation('DELETE', '/volumes/runbox-ws-ten_1-ses_2')).toBe('DELETE /volumes/:id');
    expect(dockerOperation('GET', '/_ping')).toBe('GET /_ping');
    expect(dockerOperation('get', '/v1.41/containers/json?all=1')).toBe('GET /containers/json');
  });

  it('keeps image names with slashes and unknown resources from making new labels', () => {
    expect(dockerOperation('GET', '/images/registry.example/team/runbox-sandbox:abc/json')).toBe('GET /images/:id/json');
    expect(dockerOperation('GET', '/images/registry.example/team/image')).toBe('GET /images/:id/:part');
    expect(dockerOperation('POST', '/plugins/anything/at/all')).toBe('POST /other');
    expect(dockerOperation('GET', '/')).toBe('GET /');
  });
});
