import { colourEnabled, describeCall, formatDuration, makeStyle, oneLine, printable, table } from './terminal';

describe('terminal output', () => {
  it('shortens a tool call to one line with its arguments', () => {
    expect(describeCall('terminal', { command: 'npm test' })).toBe('terminal(command: "npm test")');
    const long = describeCall('write_file', { path: 'a.txt', content: 'x'.repeat(500) }, 60);
    expect(long.length).toBeLessThanOrEqual(60);
    expect(long.endsWith('…')).toBe(true);
    expect(describeCall('edit', { lines: [1, 2] })).toBe('edit(lines: [1,2])');
  });

  it('strips escape sequences and control characters from server text', () => {
    expect(printable('ok\x1b[31mred\x1b[0m\x07\r\nnext')).toBe('okred\nnext');
    expect(oneLine('a\n  b\tc', 10)).toBe('a b c');
  });

  it('uses colour only on a terminal, and never with NO_COLOR or --no-color', () => {
    const tty = { isTTY: true } as NodeJS.WriteStream;
    const pipe = { isTTY: false } as NodeJS.WriteStream;
    expect(colourEnabled(tty, {}, false)).toBe(true);
    expect(colourEnabled(pipe, {}, false)).toBe(false);
    expect(colourEnabled(tty, { NO_COLOR: '1' }, false)).toBe(false);
    expect(colourEnabled(tty, {}, true)).toBe(false);
    expect(makeStyle(false).red('x')).toBe('x');
    expect(makeStyle(true).red('x')).toBe('\x1b[31mx\x1b[39m');
  });

  it('formats durations and tables', () => {
    expect(formatDuration(250)).toBe('250ms');
    expect(formatDuration(1520)).toBe('1.5s');
    expect(formatDuration(125_000)).toBe('2m05s');
    expect(table(['A', 'B'], [['long-value', 'x']])).toBe('A           B\nlong-value  x');
  });
});
