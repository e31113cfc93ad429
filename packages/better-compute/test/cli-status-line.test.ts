/**
 * The CLI's status line on a real terminal (a pseudo-terminal from node-pty): processIO rewrites it
 * in place and clears it before any other line, so a wait's ticking time never mixes with the lines
 * it prints; piped, the same program writes no status at all.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { spawn } from '@lydell/node-pty';
import { describe, expect, it } from 'vitest';

const entry = join(import.meta.dirname, '..', 'dist', 'cli', 'index.js');
const SCRIPT = `
const { processIO } = await import(${JSON.stringify(entry)});
const io = processIO();
io.status?.('inst_1: provisioning, 1.0 s of 5m');
io.status?.('inst_1: provisioning, 2.0 s of 5m');
io.err('inst_1: running (2.4 s)');
io.status?.(null);
io.out('done');
`;

describe('the status line', () => {
  it('is rewritten in place on a terminal and cleared before a line', async () => {
    const terminal = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT], {
      cols: 100,
      rows: 10,
      env: { PATH: process.env.PATH ?? '' },
    });
    let output = '';
    terminal.onData((data) => (output += data));
    const code = await new Promise<number>((resolve) => terminal.onExit(({ exitCode }) => resolve(exitCode)));
    expect(code).toBe(0);
    expect(output).toContain(
      '\r\x1b[Kinst_1: provisioning, 1.0 s of 5m\r\x1b[Kinst_1: provisioning, 2.0 s of 5m',
    );
    // Cleared, then the line: nothing of the status is left on the line's row.
    expect(output).toContain('2.0 s of 5m\r\x1b[Kinst_1: running (2.4 s)');
    expect(output.trimEnd().endsWith('done')).toBe(true);
  });

  it('is absent where stderr is not a terminal', () => {
    const piped = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT], { encoding: 'utf8' });
    expect(piped.status).toBe(0);
    expect(piped.stderr).toBe('inst_1: running (2.4 s)\n');
    expect(piped.stdout).toBe('done\n');
  });
});
