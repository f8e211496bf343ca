import { ChunkHit } from './rag.repository';
import { fuse, withoutOverlaps } from './rag-search.service';

const hit = (id: string, path: string, startLine: number, endLine: number): ChunkHit => ({
  id,
  path,
  startLine,
  endLine,
  content: id,
  score: 0,
  match: 'text',
});

describe('fuse', () => {
  it('ranks what both lists agree on first, then by each list\'s order', () => {
    const a = hit('a', 'x', 1, 10);
    const b = hit('b', 'y', 1, 10);
    const c = hit('c', 'z', 1, 10);
    expect(fuse([[a, b], [c, b]]).map((h) => h.id)).toEqual(['b', 'a', 'c']);
  });
});

describe('withoutOverlaps', () => {
  it('drops a hit mostly covered by a better one of the same file, and keeps neighbours', () => {
    const kept = withoutOverlaps([hit('1', 'f', 1, 60), hit('2', 'f', 5, 60), hit('3', 'f', 51, 110), hit('4', 'g', 1, 60)], 10);
    expect(kept.map((h) => h.id)).toEqual(['1', '3', '4']);
  });

  it('stops at the limit', () => {
    expect(withoutOverlaps([hit('1', 'a', 1, 2), hit('2', 'b', 1, 2), hit('3', 'c', 1, 2)], 2)).toHaveLength(2);
  });
});
