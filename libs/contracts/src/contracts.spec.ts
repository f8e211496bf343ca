import { RequestContract } from './contract';
import { executorPingContract } from './executor-ping/executor-ping.contract';
import { executorPresenceContract } from './executor-presence/executor-presence.contract';
import { sessionReleaseContract } from './session-release/session-release.contract';
import { toolCallContract } from './tool-call/tool-call.contract';

const requestContracts: Array<RequestContract<unknown, unknown, unknown>> = [toolCallContract, sessionReleaseContract, executorPingContract, executorPresenceContract] as Array<
  RequestContract<unknown, unknown, unknown>
>;

describe('request contracts', () => {
  it.each(requestContracts.map((c) => [c.subject, c]))("%s: the adapter's error reply satisfies the reply schema", (_subject, contract) => {
    const reply = contract.errorReply({ code: 'internal_error', message: 'the handler failed' }, 'exec-1');
    expect(contract.reply.safeParse(reply).success).toBe(true);
  });

  it('keeps the small contracts small and lets tool calls carry write_file’s documented maximum', () => {
    expect(sessionReleaseContract.maxBytes).toBeLessThanOrEqual(64 * 1024);
    expect(executorPingContract.maxBytes).toBeLessThanOrEqual(64 * 1024);
    // 50,000,000 characters of write_file content, up to 4 bytes each in UTF-8.
    expect(toolCallContract.maxBytes).toBeGreaterThanOrEqual(200_000_000);
  });
});
