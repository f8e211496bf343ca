import { maxSandboxes } from './sandbox-quota';

describe('maxSandboxes', () => {
  it('reads the limit the gateway stored', () => {
    expect(maxSandboxes({ max_sandboxes: 3, runs_per_minute: 10 })).toBe(3);
    expect(maxSandboxes({ max_sandboxes: 0 })).toBe(0);
  });

  it('counts a limit outside the tenant-limits schema as none, as the gateway does', () => {
    expect(maxSandboxes({ max_sandboxes: 2_000_000 })).toBeUndefined();
    expect(maxSandboxes({ max_sandboxes: 1.5 })).toBeUndefined();
    expect(maxSandboxes({ max_sandboxes: '3' })).toBeUndefined();
    expect(maxSandboxes(null)).toBeUndefined();
  });
});
