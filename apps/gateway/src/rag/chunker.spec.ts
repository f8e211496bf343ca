import { chunkLines } from './chunker';

const lines = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `line ${i + from}`);

describe('chunkLines', () => {
  const options = { maxLines: 10, maxChars: 1_000, overlapLines: 3, maxPiecesPerLine: 4 };

  it('covers every line with exact 1-based ranges and overlapping neighbours', () => {
    const chunks = chunkLines(lines(25).join('\n') + '\n', options);
    expect(chunks.map((c) => [c.startLine, c.endLine])).toEqual([
      [1, 10],
      [8, 17],
      [15, 24],
      [22, 25],
    ]);
    expect(chunks[1].content.split('\n')[0]).toBe('line 8');
    expect(chunks[3].content).toBe(lines(4, 22).join('\n'));
  });

  it('ends a chunk early at the character budget', () => {
    const long = Array.from({ length: 6 }, (_, i) => `${i}`.repeat(300));
    const chunks = chunkLines(long.join('\n'), options);
    expect(chunks.every((c) => c.content.length <= 1_000)).toBe(true);
    expect(chunks[0]).toMatchObject({ startLine: 1, endLine: 3 });
  });

  it('cuts one very long line into pieces that share its line number', () => {
    const chunks = chunkLines(`short\n${'x'.repeat(2_500)}\nafter`, { ...options, overlapLines: 0 });
    expect(chunks.map((c) => [c.startLine, c.endLine, c.content.length])).toEqual([
      [1, 1, 5],
      [2, 2, 1_000],
      [2, 2, 1_000],
      [2, 2, 500],
      [3, 3, 5],
    ]);
  });

  it('strips CR from CRLF lines, skips blank runs, and gives nothing for an empty file', () => {
    expect(chunkLines('a\r\nb\r\n', options)).toEqual([{ startLine: 1, endLine: 2, content: 'a\nb' }]);
    expect(chunkLines('', options)).toEqual([]);
    expect(chunkLines('\n\n  \n', options)).toEqual([]);
  });
});
