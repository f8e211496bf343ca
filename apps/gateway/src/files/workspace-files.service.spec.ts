import { RunboxConfig } from '@app/config';
import { WorkspaceFilesReply } from '@app/contracts';
import { AppError } from '@app/errors';
import { NatsClient } from '@app/messaging';
import { SshSessionBackends } from '../servers/ssh-session-backends';
import { SessionsRepository } from '../sessions/sessions.repository';
import { WorkspaceFilesService } from './workspace-files.service';

/** The service's routing and error mapping, with the executor's answer scripted. */
function service(options: { session?: { executorId: string | null } | null; ssh?: boolean; reply?: WorkspaceFilesReply }) {
  const sent: unknown[] = [];
  const nats = {
    connection: {},
    request: async (_contract: unknown, payload: unknown) => {
      sent.push(payload);
      return options.reply ?? { ok: true, executor_id: 'e1', path: 'a.txt', kind: 'file' };
    },
  } as unknown as NatsClient;
  const sessions = { toolRoute: async () => (options.session === undefined ? { executorId: 'e1' } : options.session) } as unknown as SessionsRepository;
  const ssh = { describe: async () => (options.ssh ? { type: 'ssh', server: 'prod' } : undefined) } as unknown as SshSessionBackends;
  const config = { RUNBOX_FILES_MAX_BYTES: 1024, RUNBOX_SANDBOX_BACKEND: 'docker' } as RunboxConfig;
  return { files: new WorkspaceFilesService(nats, config, sessions, ssh), sent };
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected a failure');
}

describe('WorkspaceFilesService', () => {
  it('answers 404 for a session that is missing or another tenant’s, without asking an executor', async () => {
    const { files, sent } = service({ session: null });
    expect((await failure(files.delete('t1', 'ses_x', 'a.txt', false))).code).toBe('not_found');
    expect(sent).toEqual([]);
  });

  it('refuses sessions on a saved SSH server with unsupported_backend', async () => {
    const { files, sent } = service({ ssh: true });
    const err = await failure(files.delete('t1', 'ses_1', 'a.txt', false));
    expect(err.code).toBe('unsupported_backend');
    expect(err.message).toContain('vps_download');
    expect(sent).toEqual([]);
  });

  it('sends the tenant, the session and the deployment’s backend with every request', async () => {
    const { files, sent } = service({});
    expect(await files.delete('t1', 'ses_1', 'a.txt', true)).toEqual({ path: 'a.txt', kind: 'file' });
    expect(sent).toEqual([{ op: 'delete', path: 'a.txt', recursive: true, tenant_id: 't1', session_id: 'ses_1', backend: 'docker' }]);
  });

  it.each([
    ['not_found', 'not_found', undefined],
    ['is_a_directory', 'conflict', { reason: 'is_a_directory' }],
    ['not_a_directory', 'conflict', { reason: 'not_a_directory' }],
    ['path_outside_workspace', 'validation_failed', { reason: 'path_outside_workspace' }],
    ['invalid_path', 'validation_failed', { reason: 'invalid_path' }],
    ['backend_mismatch', 'unsupported_backend', undefined],
    ['transfer_failed', 'sandbox_failed', { reason: 'transfer_failed' }],
  ])('maps the executor’s %s to %s', async (code, expected, details) => {
    const { files } = service({ reply: { ok: false, executor_id: 'e1', error: { code, message: 'why' } } });
    const err = await failure(files.delete('t1', 'ses_1', 'a.txt', false));
    expect(err.code).toBe(expected);
    expect(err.details).toEqual(details);
  });
});
