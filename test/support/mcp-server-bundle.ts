import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/**
 * Loads `requests` in a child Node process from the repository's node_modules and reports
 * every CommonJS module that loading pulled in, with how each `require` inside it resolved.
 */
const COLLECT = `
const Module = require('module');
const fs = require('fs');
const path = require('path');
const resolved = {};
// Hooked at require, not at _resolveFilename: Node caches relative resolutions per directory
// and skips _resolveFilename for repeats, which would leave links out.
const originalRequire = Module.prototype.require;
Module.prototype.require = function (request) {
  const exported = originalRequire.call(this, request);
  const to = Module._resolveFilename(request, this);
  if (path.isAbsolute(to)) (resolved[this.filename] ??= {})[request] = to;
  return exported;
};
const top = {};
for (const request of JSON.parse(process.argv[1])) { top[request] = require.resolve(request); require(request); }
const files = {};
for (const file of Object.keys(require.cache)) files[file] = fs.readFileSync(file, 'utf8');
process.stdout.write(JSON.stringify({ top, resolved, files }));
`;

/**
 * A single-file CommonJS program: `entrySource` plus every module its `requires` (bare
 * package specifiers, loaded from this repository's node_modules) pull in, with no
 * node_modules beside it. That is how a test ships an MCP server written with the SDK
 * into a sandbox's workspace in one file. Node's built-in modules stay real requires.
 */
export function bundleProgram(entrySource: string, requires: string[]): string {
  const out = execFileSync(process.execPath, ['-e', COLLECT, JSON.stringify(requires)], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
  const { top, resolved, files } = JSON.parse(out.toString('utf8')) as {
    top: Record<string, string>;
    resolved: Record<string, Record<string, string>>;
    files: Record<string, string>;
  };
  const ids = new Map(Object.keys(files).map((file, i) => [file, i]));
  const idOf = (file: string): number => {
    const id = ids.get(file);
    if (id === undefined) throw new Error(`${file} was resolved but never loaded`);
    return id;
  };
  const modules = Object.entries(files).map(([file, source]) =>
    file.endsWith('.json')
      ? `function (module) { module.exports = ${source.trim()}; }`
      : `function (module, exports, require, __filename, __dirname) {\n${source.replace(/^#!.*/, '')}\n}`,
  );
  const links = (map: Record<string, string>) => JSON.stringify(Object.fromEntries(Object.entries(map).map(([request, file]) => [request, idOf(file)])));
  const resolution = Object.keys(files).map((file) => links(resolved[file] ?? {}));
  return [
    "'use strict';",
    `const modules = [${modules.join(',\n')}];`,
    `const links = [${resolution.join(',\n')}];`,
    `const entryLinks = ${links(top)};`,
    'const cache = [];',
    'function load(id) {',
    '  if (cache[id]) return cache[id].exports;',
    '  const module = { exports: {} };',
    '  cache[id] = module;',
    '  modules[id].call(module.exports, module, module.exports, requireFrom(links[id]), "/bundle/" + id + ".js", "/bundle");',
    '  return module.exports;',
    '}',
    'function requireFrom(map) {',
    '  return (request) => (Object.prototype.hasOwnProperty.call(map, request) ? load(map[request]) : require(request));',
    '}',
    `(function (require) {\n${entrySource}\n})(requireFrom(entryLinks));`,
    '',
  ].join('\n');
}
