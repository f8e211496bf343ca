#!/usr/bin/env node
// Prints one closing line for the whole suite, `tests: N passed, N failed`, from Jest's JSON
// report and the Python agent suite's unittest output.
const fs = require('node:fs');
const path = require('node:path');

const dir = process.argv[2];
let passed = 0;
let failed = 0;

const jestFile = path.join(dir, 'jest.json');
if (fs.existsSync(jestFile)) {
  const report = JSON.parse(fs.readFileSync(jestFile, 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests + report.numRuntimeErrorTestSuites;
} else {
  failed += 1;
}

const agentFile = path.join(dir, 'agent.txt');
const agent = fs.existsSync(agentFile) ? fs.readFileSync(agentFile, 'utf8') : '';
const ran = /^Ran (\d+) tests?/m.exec(agent);
if (ran) {
  const total = Number(ran[1]);
  const bad = /^FAILED \((.*)\)/m.exec(agent);
  const count = (kind) => Number((bad && new RegExp(`${kind}=(\\d+)`).exec(bad[1])?.[1]) ?? 0);
  const agentFailed = count('failures') + count('errors');
  passed += total - agentFailed - count('skipped');
  failed += agentFailed;
} else {
  failed += 1;
}

console.log(`tests: ${passed} passed, ${failed} failed`);
