/**
 * `usage export --export-format csv|jsonl --out FILE`: the billing export, written to a NEW file
 * with mode 0600 (never over an existing one: ALREADY_EXISTS, and nothing written). The export
 * itself is never printed; the command prints where it went and how many rows.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { checkTimes } from './list.js';

function alreadyExists(path: string): ComputeError {
  return new ComputeError('ALREADY_EXISTS', `${path} already exists; usage export never writes over a file`, {
    hint: 'Pass --out with a new file name.',
    details: { field: 'out' },
  });
}

export default defineCommand({
  name: 'usage export',
  group: 'Events',
  summary: 'Write the usage windows as CSV or JSON lines to a new 0600 file (usage.export)',
  target: 'token',
  calls: ['usage.export'],
  flags: {
    exportFormat: {
      type: 'string',
      choices: ['csv', 'jsonl'],
      default: 'csv',
      description: 'The file’s format',
    },
    out: {
      type: 'string',
      required: true,
      description: 'A new file to write (mode 0600)',
      placeholder: 'FILE',
    },
    pool: { type: 'id', kind: 'pool', description: 'Only this pool' },
    from: {
      type: 'string',
      description: 'From this hour (default: 24 hours before --to)',
      placeholder: 'TIME',
    },
    to: { type: 'string', description: 'Until this time, exclusive (default: now)', placeholder: 'TIME' },
  },
  examples: [
    'better-compute usage export --export-format csv --out usage-2026-01.csv',
    'better-compute usage export --export-format jsonl --out usage.jsonl --from 2026-01-01T00:00:00Z',
  ],
  async run({ flags, api, io }) {
    checkTimes(flags);
    const [{ open, stat }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const path = resolve(io.cwd, flags.out);
    // Checked before the call, so an existing file costs nothing; 'wx' below closes the race.
    if (
      await stat(path).then(
        () => true,
        () => false,
      )
    )
      throw alreadyExists(flags.out);
    const exported = await (
      await api()
    ).call('usage.export', {
      format: flags.exportFormat as 'csv' | 'jsonl',
      ...(flags.pool ? { poolId: flags.pool } : {}),
      ...(flags.from ? { from: flags.from } : {}),
      ...(flags.to ? { to: flags.to } : {}),
    });
    let handle;
    try {
      handle = await open(path, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw alreadyExists(flags.out);
      throw error;
    }
    try {
      await handle.writeFile(exported.content, 'utf8');
    } finally {
      await handle.close();
    }
    return {
      out: path,
      format: exported.format,
      rows: exported.rows,
      bytes: Buffer.byteLength(exported.content, 'utf8'),
    };
  },
});
