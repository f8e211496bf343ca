import { toolCallWaitMs, toolTimeLimitSeconds } from './tool-time-limit';

describe('toolTimeLimitSeconds', () => {
  const terminal = { timeoutSeconds: 120 };
  const grep = { timeoutSeconds: 60 };

  it("is the tool's default, or 120 for a tool that names none", () => {
    expect(toolTimeLimitSeconds('grep', grep, { pattern: 'x' })).toBe(60);
    expect(toolTimeLimitSeconds('unknown', undefined, {})).toBe(120);
  });

  it("takes the terminal's own timeout_seconds, above or below the default", () => {
    expect(toolTimeLimitSeconds('terminal', terminal, { command: 'make', timeout_seconds: 600 })).toBe(600);
    expect(toolTimeLimitSeconds('terminal', terminal, { command: 'ls', timeout_seconds: 5 })).toBe(5);
  });

  it('reads timeout_seconds from the terminal only', () => {
    expect(toolTimeLimitSeconds('grep', grep, { pattern: 'x', timeout_seconds: 600 })).toBe(60);
  });

  it("uses the run's limits.timeouts entry as the default and as a ceiling on what is asked", () => {
    expect(toolTimeLimitSeconds('grep', grep, {}, { grep: 300 })).toBe(300);
    expect(toolTimeLimitSeconds('terminal', terminal, { command: 'make', timeout_seconds: 600 }, { terminal: 30 })).toBe(30);
    expect(toolTimeLimitSeconds('terminal', terminal, { command: 'ls', timeout_seconds: 5 }, { terminal: 30 })).toBe(5);
    expect(toolTimeLimitSeconds('grep', grep, {}, { terminal: 30 })).toBe(60);
  });

  it('ignores arguments that are not an object', () => {
    expect(toolTimeLimitSeconds('terminal', terminal, { _raw: '{' })).toBe(120);
    expect(toolTimeLimitSeconds('terminal', terminal, null)).toBe(120);
  });
});

describe('toolCallWaitMs', () => {
  it("is the sandbox's start, the call's limit and the executor's grace together", () => {
    expect(toolCallWaitMs({ RUNBOX_SANDBOX_START_TIMEOUT_SECONDS: 60, RUNBOX_EXECUTOR_GRACE_MS: 15_000 }, 10_000)).toBe(85_000);
  });
});
