/**
 * `join-tokens create --pool POOL [--uses N] [--ttl DURATION] [--pre-approved] [--out FILE]`:
 * joinTokens.create. With --out the one-time token goes to a new file of mode 0600, created before
 * the call (an existing file is ALREADY_EXISTS and no token is minted), and the answer is printed
 * without it; without --out the token is printed this once. The method is not idempotent on purpose
 * (a replay would have to keep the secret), so there is no --key.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../../define.js';
import { defined } from '../../shared.js';

export default defineCommand({
  name: 'join-tokens create',
  group: 'Nodes',
  summary:
    'Mint a join token for a pool; --out writes the one-time token to a new 0600 file (joinTokens.create)',
  target: 'token',
  calls: ['joinTokens.create'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The pool nodes join' },
    uses: {
      type: 'number',
      integer: true,
      min: 1,
      max: 100_000,
      description: 'How many machines may join with it (default 1)',
      placeholder: 'N',
    },
    ttl: {
      type: 'duration',
      description: 'How long it stays valid, 1m to 30d (default 1d)',
      placeholder: 'DURATION',
    },
    preApproved: {
      type: 'boolean',
      description: 'Machines joining with it become nodes at once, without a join request to approve',
    },
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    out: {
      type: 'string',
      description: 'Write the one-time token to this new file (mode 0600) instead of printing it',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute join-tokens create --pool pool_01k… --uses 10 --ttl 2h --out join.token',
    'better-compute join-tokens create --pool pool_01k… --pre-approved --query token',
  ],
  async run({ flags, io, api }) {
    const input = defined({
      poolId: flags.pool,
      uses: flags.uses,
      lifetimeSeconds: flags.ttl,
      preApproved: flags.preApproved ? true : undefined,
      description: flags.description,
    });
    if (flags.out === undefined) return (await api()).call('joinTokens.create', input);

    const [{ open, unlink }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const path = resolve(io.cwd, flags.out);
    // Created first, exclusively: an existing file fails here, before a token is minted for nothing.
    let file: Awaited<ReturnType<typeof open>>;
    try {
      file = await open(path, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST')
        throw new ComputeError(
          'ALREADY_EXISTS',
          `${flags.out} already exists; a token is never written over a file`,
          {
            details: { field: 'out' },
          },
        );
      throw error;
    }
    try {
      let answer;
      try {
        answer = await (await api()).call('joinTokens.create', input);
      } catch (error) {
        await file.close();
        await unlink(path).catch(() => {});
        throw error;
      }
      await file.writeFile(`${answer.token}\n`, 'utf8');
      await file.chmod(0o600);
      return { joinToken: answer.joinToken, out: path };
    } finally {
      await file.close().catch(() => {});
    }
  },
});
