import { apiErrorFrom, BadRequestError, InternalServerError, NotFoundError, RateLimitError } from './errors';
import { DEFAULT_RETRY_POLICY, parseRetryAfterMs, retryDelayMs } from './retry';
import { filePathSegment, splitStreams } from './sessions';

describe('retry delays', () => {
  it('honours Retry-After in seconds or as a date, and refuses waits over a minute', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfterMs('2', now)).toBe(2000);
    expect(parseRetryAfterMs('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfterMs('soon', now)).toBeUndefined();
    expect(retryDelayMs(1, DEFAULT_RETRY_POLICY, '3', now)).toBe(3000);
    expect(retryDelayMs(1, DEFAULT_RETRY_POLICY, '120', now)).toBeUndefined();
  });

  it('backs off exponentially with jitter, capped', () => {
    const policy = { maxRetries: 5, baseDelayMs: 100, maxDelayMs: 1000 };
    expect(retryDelayMs(1, policy, null, 0, () => 0)).toBe(50);
    expect(retryDelayMs(1, policy, null, 0, () => 1)).toBe(100);
    expect(retryDelayMs(3, policy, null, 0, () => 1)).toBe(400);
    expect(retryDelayMs(10, policy, null, 0, () => 1)).toBe(1000);
  });
});

describe('typed errors', () => {
  it('maps status to a class and keeps the API code, message and request id', () => {
    const notFound = apiErrorFrom(404, '{"error":{"code":"not_found","message":"no run run_x"}}', 'req-1');
    expect(notFound).toBeInstanceOf(NotFoundError);
    expect(notFound).toMatchObject({ status: 404, code: 'not_found', message: 'no run run_x', requestId: 'req-1' });
    expect(apiErrorFrom(400, '{"error":{"code":"validation_failed","message":"input: required","details":{"x":1}}}')).toMatchObject({
      constructor: BadRequestError,
      details: { x: 1 },
    });
    expect(apiErrorFrom(429, '')).toBeInstanceOf(RateLimitError);
    // A proxy's HTML error page still gives a usable error.
    expect(apiErrorFrom(502, '<html>bad gateway</html>')).toMatchObject({ constructor: InternalServerError, code: 'http_502', message: '<html>bad gateway</html>' });
  });
});

describe('session helpers', () => {
  it('encodes each segment of a workspace path and keeps the slashes', () => {
    expect(filePathSegment('src/my file#1.ts')).toBe('src/my%20file%231.ts');
    expect(filePathSegment('/notes.md')).toBe('notes.md');
    expect(() => filePathSegment('/')).toThrow('a file path is required');
  });

  it("splits the terminal tool's report into stdout and stderr", () => {
    expect(splitStreams('status: exited\nexit_code: 0\nstdout:\na\nb\nstderr:\nc')).toEqual({ stdout: 'a\nb', stderr: 'c' });
    expect(splitStreams('status: exited\nexit_code: 1\nstderr:\nstdout:\nboom')).toEqual({ stdout: '', stderr: 'stdout:\nboom' });
    expect(splitStreams('status: exited\nexit_code: 0')).toEqual({ stdout: '', stderr: '' });
  });
});
