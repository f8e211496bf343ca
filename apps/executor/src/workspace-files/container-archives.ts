import Docker from 'dockerode';
import type { Readable } from 'node:stream';

/**
 * Docker's archive API on a session's container: a path's tar out (GET /archive) and a tar
 * extracted into a folder (PUT /archive). Both stream; neither holds a file in memory.
 * Docker resolves the path inside the container's own root, so even a path swapped for a
 * symlink after the agent checked it cannot reach the host; the container's root file
 * system is read-only, so only the workspace volume can be written.
 */
export class ContainerArchives {
  constructor(private readonly docker: Docker) {}

  async read(containerId: string, path: string): Promise<Readable> {
    return (await this.docker.getContainer(containerId).getArchive({ path })) as Readable;
  }

  /** Extracts `tar` into the existing folder `dir`; resolves once Docker has extracted all of it. */
  async write(containerId: string, dir: string, tar: Readable): Promise<void> {
    // A failing source aborts the request to Docker, which then extracts nothing more; the
    // caller removes what it did extract (the staging folder).
    const abort = new AbortController();
    let sourceError: Error | undefined;
    tar.once('error', (err: Error) => {
      sourceError = err;
      abort.abort();
    });
    try {
      await this.docker.getContainer(containerId).putArchive(tar, { path: dir, noOverwriteDirNonDir: 'true', abortSignal: abort.signal });
    } catch (err) {
      throw sourceError ?? err;
    }
    if (sourceError) throw sourceError;
  }
}
