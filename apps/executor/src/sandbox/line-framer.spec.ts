import { FrameTooLongError, LineFramer } from './line-framer';

describe('LineFramer', () => {
  it('returns every line a chunk finishes, and keeps the unfinished rest for the next one', () => {
    const framer = new LineFramer(100);
    expect(framer.push(Buffer.from('one\ntwo\nthr'))).toEqual(['one', 'two']);
    expect(framer.buffered).toBe(3);
    expect(framer.push(Buffer.from('ee\n'))).toEqual(['three']);
    expect(framer.buffered).toBe(0);
  });

  it('decodes a character split between two chunks', () => {
    const framer = new LineFramer(100);
    const bytes = Buffer.from('é\n');
    expect(framer.push(bytes.subarray(0, 1))).toEqual([]);
    expect(framer.push(bytes.subarray(1))).toEqual(['é']);
  });

  it('refuses a line longer than its limit, counted in bytes across chunks, and holds nothing after', () => {
    const framer = new LineFramer(10);
    expect(framer.push(Buffer.from('123456'))).toEqual([]);
    expect(() => framer.push(Buffer.from('7890a'))).toThrow(FrameTooLongError);
    expect(framer.buffered).toBe(0);
  });

  it('accepts a line of exactly the limit', () => {
    const framer = new LineFramer(4);
    expect(framer.push(Buffer.from('abcd\n'))).toEqual(['abcd']);
  });
});
