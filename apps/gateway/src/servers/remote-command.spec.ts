import { formatCommandOutput, RemoteCommandOutcome } from './remote-command';

const outcome = (o: Partial<RemoteCommandOutcome>): RemoteCommandOutcome => ({
  status: 'exited',
  exitCode: 0,
  signal: null,
  stdout: '',
  stderr: '',
  stdoutBytes: 0,
  stderrBytes: 0,
  durationMs: 5,
  ...o,
});

describe('formatCommandOutput', () => {
  it("uses the terminal tool's layout, leaving out empty streams and trailing newlines", () => {
    expect(formatCommandOutput(outcome({ stdout: 'a\nb\n\n' }), 120, 30_000)).toBe('status: exited\nexit_code: 0\nstdout:\na\nb');
    expect(formatCommandOutput(outcome({ exitCode: 2, stderr: 'no such file\n' }), 120, 30_000)).toBe('status: exited\nexit_code: 2\nstderr:\nno such file');
  });

  it('says a timeout closed the channel and that the exit code is unknown', () => {
    const text = formatCommandOutput(outcome({ status: 'timed_out', exitCode: null, stdout: 'partial' }), 5, 30_000);
    expect(text).toMatch(/^status: timed_out\nexit_code: unknown\nnote: timed out after 5 seconds; the channel was closed/);
    expect(text.endsWith('stdout:\npartial')).toBe(true);
  });

  it('cuts to max_output_chars with a line saying how much, so a flood on stdout cannot hide stderr', () => {
    const text = formatCommandOutput(outcome({ stdout: 'x'.repeat(100_000), stderr: 'the real error' }), 120, 2_000);
    expect(text.length).toBeLessThan(2_200);
    expect(text).toContain('stderr:\nthe real error');
    expect(text).toMatch(/… \d+ characters cut \(max_output_chars=2000\)\nstderr:/);
  });
});
