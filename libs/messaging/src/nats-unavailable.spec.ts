import { ErrorCode, NatsError } from 'nats';
import { isNatsUnavailable } from './nats-unavailable';
import { NatsTimeoutError } from './nats-client';

describe('isNatsUnavailable', () => {
  it('recognises a connection that is closed or reconnecting, and a JetStream call that got no answer in time', () => {
    expect(isNatsUnavailable(NatsError.errorForCode(ErrorCode.Disconnect))).toBe(true);
    expect(isNatsUnavailable(NatsError.errorForCode(ErrorCode.ConnectionClosed))).toBe(true);
    expect(isNatsUnavailable(NatsError.errorForCode(ErrorCode.Timeout))).toBe(true);
    expect(isNatsUnavailable(new Error('publish failed', { cause: NatsError.errorForCode(ErrorCode.Timeout) }))).toBe(true);
  });

  it('leaves a refused message and a tool call with an unknown outcome alone', () => {
    expect(isNatsUnavailable(NatsError.errorForCode(ErrorCode.BadPayload))).toBe(false);
    expect(isNatsUnavailable(new NatsTimeoutError('runbox.executor.tool.call.v1', false))).toBe(false);
    expect(isNatsUnavailable(new Error('something else'))).toBe(false);
  });
});
