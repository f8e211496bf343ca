import { ChannelClosedError, ChannelTimeoutError, ProtocolViolationError } from './agent-channel';
import { SandboxQuotaError } from './sandbox-quota';
import {
  BackendDisabledError,
  BackendMismatchError,
  NoSandboxHeldError,
  SandboxUnavailableError,
  SessionNotFoundError,
} from './sandbox.service';

/** The failures of reaching a sandbox, as reply codes; undefined for anything else (a bug). */
export function sandboxFailure(err: unknown): { code: string; message: string } | undefined {
  if (!(err instanceof Error)) return undefined;
  if (err instanceof SessionNotFoundError || err instanceof NoSandboxHeldError) return { code: 'not_found', message: err.message };
  if (err instanceof SandboxQuotaError) return { code: 'quota_exceeded', message: err.message };
  if (err instanceof BackendDisabledError) return { code: 'backend_disabled', message: err.message };
  if (err instanceof BackendMismatchError) return { code: 'backend_mismatch', message: err.message };
  if (err instanceof SandboxUnavailableError || err instanceof ProtocolViolationError) return { code: 'sandbox_failed', message: err.message };
  if (err instanceof ChannelClosedError || err instanceof ChannelTimeoutError) return { code: 'sandbox_failed', message: err.message };
  return undefined;
}
