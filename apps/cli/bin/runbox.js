#!/usr/bin/env node
'use strict';
// The `runbox` command. The CLI and the SDK it uses are TypeScript in this repository; the
// first start after a change compiles them (a few seconds) into a cache folder named by a
// hash of their sources, so later starts only hash the sources and load plain JavaScript.
require('./compile-cache')
  .ensureBuilt()
  .then((main) => require(main).main(process.argv.slice(2)))
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    process.stderr.write(`runbox: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
