import { hardenedContainerSpec } from './container-spec';
import { SandboxPolicy } from './sandbox-policy';

const policy: SandboxPolicy = { image: 'img:1', memoryBytes: 512 << 20, nanoCpus: 2e9, pidsLimit: 99, network: false, tmpfsSizeMb: 64, fileSearchTimeoutSeconds: 20 };

describe('hardenedContainerSpec', () => {
  it('has no network unless the deployment enables it', () => {
    const closed = hardenedContainerSpec('c', {}, 'v', policy);
    expect(closed.NetworkDisabled).toBe(true);
    expect(closed.HostConfig?.NetworkMode).toBe('none');
    const open = hardenedContainerSpec('c', {}, 'v', { ...policy, network: true });
    expect(open.NetworkDisabled).toBe(false);
    expect(open.HostConfig?.NetworkMode).toBe('bridge');
  });

  it('takes image, limits and mounts from the policy alone', () => {
    const spec = hardenedContainerSpec('runbox-ses_1', { a: 'b' }, 'runbox-ses_1-ws', policy);
    expect(spec).toMatchObject({ name: 'runbox-ses_1', Image: 'img:1', User: '0:0', WorkingDir: '/workspace', Labels: { a: 'b' } });
    expect(spec.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      CapAdd: ['SETUID', 'SETGID', 'KILL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Privileged: false,
      Memory: 512 << 20,
      MemorySwap: 512 << 20,
      NanoCpus: 2e9,
      PidsLimit: 99,
      Tmpfs: { '/tmp': 'rw,exec,nosuid,nodev,size=64m,mode=1777', '/run/runbox': 'rw,noexec,nosuid,nodev,size=64k,mode=0700' },
    });
    expect(spec.HostConfig?.Mounts).toEqual([
      expect.objectContaining({ Type: 'volume', Source: 'runbox-ses_1-ws', Target: '/workspace', VolumeOptions: expect.objectContaining({ Labels: { a: 'b' } }) }),
    ]);
    expect(spec.HostConfig?.Binds).toBeUndefined();
  });

  it('runs the agent as root with three capabilities, and has it start tools as the sandbox user', () => {
    const spec = hardenedContainerSpec('c', {}, 'v', policy);
    expect(spec.Env).toEqual(expect.arrayContaining(['RUNBOX_TOOL_USER=1000:1000', 'RUNBOX_AGENT_SOCKET=/run/runbox/agent.sock']));
    expect(spec.HostConfig?.CapAdd).not.toEqual(expect.arrayContaining(['DAC_OVERRIDE']));
  });
});
