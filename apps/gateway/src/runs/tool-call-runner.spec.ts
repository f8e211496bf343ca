import { callOrderingKey } from './tool-call-runner';

/** Which of one turn's calls must wait for each other: those on the same file, and no others. */
describe('callOrderingKey', () => {
  let n = 0;
  const fileCall = (path: unknown) => callOrderingKey({ callId: `call_${++n}`, arguments: { path, content: 'x' } }, 'path');
  const terminalCall = () => callOrderingKey({ callId: `call_${++n}`, arguments: { command: 'ls a' } }, undefined);

  it('puts the spellings of one file in one group', () => {
    expect(new Set([fileCall('./a'), fileCall('/workspace/a'), fileCall('a')]).size).toBe(1);
    expect(fileCall('a//b')).toBe(fileCall('a/b'));
    expect(fileCall('x/../a/./b')).toBe(fileCall('a/b'));
  });

  it('keeps different files apart', () => {
    expect(fileCall('b.txt')).not.toBe(fileCall('a'));
    expect(fileCall('a/b')).not.toBe(fileCall('a'));
    // Only the workspace prefix is dropped, not a folder that merely starts like it.
    expect(fileCall('/workspace2/a')).not.toBe(fileCall('a'));
  });

  it('gives a call without a path a group of its own', () => {
    expect(terminalCall()).not.toBe(terminalCall());
    expect(terminalCall()).not.toBe(fileCall('a'));
    // A path argument that is missing or not a string names no file either.
    expect(fileCall(undefined)).not.toBe(fileCall(undefined));
    expect(callOrderingKey({ callId: 'call_raw', arguments: { _raw: '{"path": "a"' } }, 'path')).toBe('call:call_raw');
  });
});
