/**
 * `usage export --export-format csv|jsonl --out FILE`: the billing export, written to a NEW file
 * with mode 0600 (never over an existing one: ALREADY_EXISTS, and nothing written). The file is
 * created before the call, so a bad --out costs nothing, and removed when the call fails. The
 * export itself is never printed; the command prints where it went and how many rows. It holds
 * every window of the period, unpaged, cut to [--from, --to) as usage list's windows are.
 */
import { defineCommand } from '../../../define.js';
import { createOutFile } from '../../shared.js';
import { checkTimes, usageFilterFlags } from './list.js';

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
    ...usageFilterFlags,
  },
  examples: [
    'better-compute usage export --export-format csv --out usage-2026-01.csv',
    'better-compute usage export --export-format jsonl --out usage.jsonl --from 2026-01-01T00:00:00Z',
  ],
  async run({ flags, api, io }) {
    checkTimes(flags);
    const file = await createOutFile(io.cwd, flags.out, 'usage export never writes over a file');
    let exported;
    try {
      exported = await (
        await api()
      ).call('usage.export', {
        format: flags.exportFormat as 'csv' | 'jsonl',
        ...(flags.pool ? { poolId: flags.pool } : {}),
        ...(flags.from ? { from: flags.from } : {}),
        ...(flags.to ? { to: flags.to } : {}),
      });
    } catch (error) {
      await file.discard();
      throw error;
    }
    await file.write(exported.content);
    return {
      out: file.path,
      format: exported.format,
      rows: exported.rows,
      bytes: Buffer.byteLength(exported.content, 'utf8'),
    };
  },
});
