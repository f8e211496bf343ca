'use strict';
// Compiles the CLI (and the SDK sources it imports) once per version of those sources.
// The output goes to node_modules/.cache/runbox-cli/<hash of the sources>/; a build is
// written to a private folder and renamed into place, so two first runs at once are safe
// (the second rename finds the folder there and keeps it).
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const CLI_DIR = path.resolve(__dirname, '..');
const REPO = path.resolve(CLI_DIR, '..', '..');
const SOURCE_DIRS = [path.join(CLI_DIR, 'src'), path.join(REPO, 'libs', 'sdk', 'src')];
const TSCONFIG = path.join(CLI_DIR, 'tsconfig.build.json');
const CACHE = path.join(REPO, 'node_modules', '.cache', 'runbox-cli');

function sourceFiles(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sourceFiles(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts')) found.push(full);
  }
  return found;
}

function sourcesHash() {
  const hash = createHash('sha256');
  const files = [TSCONFIG, __filename, ...SOURCE_DIRS.flatMap(sourceFiles)].sort();
  for (const file of files) hash.update(path.relative(REPO, file)).update('\0').update(fs.readFileSync(file)).update('\0');
  return hash.digest('hex').slice(0, 16);
}

function compile(outDir) {
  const ts = require('typescript');
  const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); } };
  const config = ts.getParsedCommandLineOfConfigFile(TSCONFIG, { outDir }, host);
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  const emitted = program.emit();
  const errors = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics].filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    const text = ts.formatDiagnostics(errors, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => REPO, getNewLine: () => '\n' });
    throw new Error(`the CLI does not compile:\n${text}`);
  }
  // The CLI imports the SDK by its package name; this resolves it to the SDK compiled alongside.
  const shim = path.join(outDir, 'node_modules', '@runbox', 'sdk');
  fs.mkdirSync(shim, { recursive: true });
  fs.writeFileSync(path.join(shim, 'index.js'), "module.exports = require('../../../libs/sdk/src/index.js');\n");
}

/** The path of the compiled CLI entry point, compiling it first if these sources were never built. */
async function ensureBuilt() {
  const dir = path.join(CACHE, sourcesHash());
  const main = path.join(dir, 'apps', 'cli', 'src', 'main.js');
  if (fs.existsSync(main)) return main;
  fs.mkdirSync(CACHE, { recursive: true });
  const temp = fs.mkdtempSync(path.join(CACHE, 'build-'));
  try {
    compile(temp);
    try {
      fs.renameSync(temp, dir);
    } catch (err) {
      if (!fs.existsSync(main)) throw err; // another start built it first: theirs is the same
    }
  } finally {
    fs.rmSync(temp, { recursive: true, force: true });
  }
  return main;
}

module.exports = { ensureBuilt };
