import Docker from 'dockerode';

/** Removes every container and volume labelled with the executor id (what `TestStack.stop` and the executor harness do last). */
export async function removeExecutorResources(executorId: string): Promise<void> {
  const docker = new Docker();
  const filters = { label: [`runbox.executor=${executorId}`] };
  const containers = await docker.listContainers({ all: true, filters });
  await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  const { Volumes } = await docker.listVolumes({ filters });
  await Promise.all((Volumes ?? []).map((v) => docker.getVolume(v.Name).remove({ force: true }).catch(() => undefined)));
}

/** Containers and volumes still labelled with the executor id: a test ends with none. */
export async function countExecutorResources(executorId: string): Promise<{ containers: number; volumes: number }> {
  const docker = new Docker();
  const filters = { label: [`runbox.executor=${executorId}`] };
  const containers = await docker.listContainers({ all: true, filters });
  const { Volumes } = await docker.listVolumes({ filters });
  return { containers: containers.length, volumes: (Volumes ?? []).length };
}

/** Polls `probe` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
