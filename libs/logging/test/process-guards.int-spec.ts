import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** Runs `code` in a fresh Node process (TypeScript, with the @app aliases); returns its exit code and output. */
function runNode(code: string): Promise<{ exitCode: number | null; output: string }> {
  const root = join(__dirname, '..', '..', '..');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', '-r', 'tsconfig-paths/register', '-e', code], {
      cwd: root,
      env: { ...process.env, TS_NODE_PROJECT: join(root, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (exitCode) => resolve({ exitCode, output }));
  });
}

const STRAY_ERRORS = `
  void Promise.reject(new Error('stray rejection'));
  setTimeout(() => { throw new Error('stray exception'); }, 0);
  setTimeout(() => { console.log('still serving'); process.exit(0); }, 200);
`;

describe('keepServingOnStrayErrors', () => {
  it('logs a stray rejection and a stray exception with an error id, and the process keeps running', async () => {
    const { exitCode, output } = await runNode(`
      const { createLogger, keepServingOnStrayErrors } = require('@app/logging');
      keepServingOnStrayErrors(createLogger({ service: 'guard-test', destination: require('pino').destination({ sync: true }) }));
      ${STRAY_ERRORS}
    `);
    expect(output).toContain('still serving');
    expect(exitCode).toBe(0);
    const logged = output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    expect(logged).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ msg: 'unhandled promise rejection; the process keeps serving', errorId: expect.any(String) }),
        expect.objectContaining({ msg: 'uncaught exception; the process keeps serving', errorId: expect.any(String) }),
      ]),
    );
  });

  it('is what keeps it running: without it Node ends the process', async () => {
    const { exitCode, output } = await runNode(STRAY_ERRORS);
    expect(output).not.toContain('still serving');
    expect(exitCode).not.toBe(0);
  });
});
