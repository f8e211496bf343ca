import { decodeText, isIgnored } from './file-rules';

describe('isIgnored', () => {
  it('leaves out hidden files and anything in hidden or dependency folders', () => {
    expect(isIgnored('src/main.ts')).toBe(false);
    expect(isIgnored('.env')).toBe(true);
    expect(isIgnored('src/.cache/x.md')).toBe(true);
    expect(isIgnored('web/node_modules/react/index.js')).toBe(true);
    expect(isIgnored('pkg/__pycache__/m.pyc')).toBe(true);
  });
});

describe('decodeText', () => {
  it('decodes UTF-8 text', () => {
    expect(decodeText(Buffer.from('héllo 数据\n'))).toEqual({ kind: 'text', text: 'héllo 数据\n' });
  });

  it('calls bytes with a NUL or invalid UTF-8 binary', () => {
    expect(decodeText(Buffer.from([0x61, 0x00, 0x62])).kind).toBe('binary');
    expect(decodeText(Buffer.from([0x61, 0xff, 0xfe, 0x62])).kind).toBe('binary');
  });
});
