import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/**
 * The gateway's feature folders form layers: a folder may import from the folders below it,
 * never from one that (directly or not) imports it back. A cycle between folders means two
 * feature modules that cannot be understood, tested or wired apart, so it fails here, with
 * the files that close it. The files at the top of src (the composition root: the gateway
 * module, bootstrap, main) import every feature and are left out; so are the specs.
 */

type FolderGraph = Map<string, Map<string, string>>;

const SRC = __dirname;
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** The feature folder a file belongs to; undefined for the composition root. */
function folderOf(file: string): string | undefined {
  const parts = relative(SRC, file).split(sep);
  return parts.length > 1 ? parts[0] : undefined;
}

/** folder → folder it imports → one file that does it (to name in a failure). */
function folderGraph(): FolderGraph {
  const graph: FolderGraph = new Map();
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    if (!from) continue;
    const edges = graph.get(from) ?? new Map<string, string>();
    graph.set(from, edges);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const to = folderOf(resolve(dirname(file), specifier));
      if (to && to !== from && !edges.has(to)) edges.set(to, relative(SRC, file));
    }
  }
  return graph;
}

/** The cycles a depth-first walk meets (at least one whenever there is any), each as `a → b (via file) → ... → a`; empty when there is none. */
function folderCycles(graph: FolderGraph): string[] {
  const cycles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (folder: string): void => {
    const onPath = path.indexOf(folder);
    if (onPath >= 0) {
      const loop = [...path.slice(onPath), folder];
      cycles.push(loop.map((f, i) => (i === 0 ? f : `${f} (via ${graph.get(loop[i - 1])?.get(f)})`)).join(' → '));
      return;
    }
    if (done.has(folder)) return;
    path.push(folder);
    for (const next of [...(graph.get(folder)?.keys() ?? [])].sort()) visit(next);
    path.pop();
    done.add(folder);
  };
  for (const folder of [...graph.keys()].sort()) visit(folder);
  return cycles;
}

describe('imports between the gateway feature folders', () => {
  it('form no cycle', () => {
    expect(folderCycles(folderGraph())).toEqual([]);
  });

  it('are read from the sources (runs builds on sessions and tools)', () => {
    const graph = folderGraph();
    expect([...(graph.get('runs')?.keys() ?? [])]).toEqual(expect.arrayContaining(['sessions', 'tools']));
  });

  it('a cycle, direct or through other folders, is reported with the files that close it', () => {
    const graph: FolderGraph = new Map([
      ['a', new Map([['b', 'a/x.ts']])],
      ['b', new Map([['c', 'b/y.ts']])],
      ['c', new Map([['a', 'c/z.ts']])],
      ['d', new Map([['a', 'd/w.ts']])],
    ]);
    expect(folderCycles(graph)).toEqual(['a → b (via a/x.ts) → c (via b/y.ts) → a (via c/z.ts)']);
    expect(folderCycles(new Map([['a', new Map([['b', 'a/x.ts']])]]))).toEqual([]);
  });
});
