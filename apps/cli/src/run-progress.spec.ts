import type { RunEvent } from '@runbox/sdk';
import { configPath } from './config';
import { RunProgress } from './run-progress';
import { makeStyle } from './terminal';

/** A stream that keeps what is written, as a pipe (not a terminal) would. */
function pipe(): NodeJS.WriteStream & { text: string } {
  const stream = { text: '', isTTY: false, columns: 0, write: (chunk: string) => ((stream.text += chunk), true) };
  return stream as unknown as NodeJS.WriteStream & { text: string };
}

describe('RunProgress without a terminal', () => {
  it('prints one line per finished call with its shortened arguments and duration, and no status line', () => {
    let now = 1_000;
    const out = pipe();
    const progress = new RunProgress(out, makeStyle(false), false, () => now);
    const events: RunEvent[] = [
      { id: 3, type: 'tool_call.started', data: { tool_call_id: 'a', name: 'terminal', arguments: { command: 'npm test' } } },
      { id: 4, type: 'tool_call.started', data: { tool_call_id: 'b', name: 'read_file', arguments: { path: 'x'.repeat(300) } } },
    ];
    events.forEach((e) => progress.onEvent(e));
    now = 2_500;
    progress.onEvent({ id: 5, type: 'tool_call.completed', data: { tool_call_id: 'a', name: 'terminal', status: 'completed', output: '', is_error: false, metadata: {} } });
    progress.onEvent({ id: 6, type: 'tool_call.completed', data: { tool_call_id: 'b', name: 'read_file', status: 'refused', output: '', is_error: true, metadata: {} } });
    progress.onEvent({ id: 7, type: 'run.completed', data: { output: 'ok', usage: { input_tokens: 1200, output_tokens: 34 } } });
    progress.stop();
    const lines = out.text.trimEnd().split('\n');
    expect(lines[0]).toBe('✓ terminal(command: "npm test") 1.5s');
    expect(lines[1]).toMatch(/^✗ read_file\(path: "x+…"\) 1\.5s refused$/);
    expect(lines[1].length).toBeLessThan(120);
    expect(lines).toHaveLength(2);
    expect(out.text).not.toContain('\r');
    expect(progress.summary()).toBe('1.5s · 1,234 tokens');
  });
});

describe('configPath', () => {
  it('honours XDG_CONFIG_HOME, else uses ~/.config', () => {
    expect(configPath({ XDG_CONFIG_HOME: '/x/cfg', HOME: '/home/u' })).toBe('/x/cfg/runbox/config.json');
    expect(configPath({ HOME: '/home/u' })).toBe('/home/u/.config/runbox/config.json');
    // A relative XDG_CONFIG_HOME is invalid by the spec and ignored.
    expect(configPath({ XDG_CONFIG_HOME: 'rel', HOME: '/home/u' })).toBe('/home/u/.config/runbox/config.json');
  });
});
