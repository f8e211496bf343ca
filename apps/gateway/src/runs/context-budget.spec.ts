import { OLDER_RESULT_HEAD_CHARS, shortenedToolResult, toolResultAllowance } from './context-budget';

describe('context budget', () => {
  it('gives the newest results the whole budget, then older ones their head', () => {
    expect(toolResultAllowance(100_000, 0)).toBe(100_000);
    expect(toolResultAllowance(100_000, 60_000)).toBe(40_000);
    expect(toolResultAllowance(100_000, 99_000)).toBe(OLDER_RESULT_HEAD_CHARS);
    expect(toolResultAllowance(100_000, 5_000_000)).toBe(OLDER_RESULT_HEAD_CHARS);
    // A budget below the head size is never exceeded by the head.
    expect(toolResultAllowance(500, 10_000)).toBe(500);
  });

  it('leaves a whole result alone and says how much of a cut one was left out', () => {
    expect(shortenedToolResult('all of it', 9)).toBe('all of it');
    const cut = shortenedToolResult('head', 1_234_567);
    expect(cut.startsWith('head\n[1,234,563 more characters')).toBe(true);
    expect(cut).toContain('the whole result is stored');
  });
});
