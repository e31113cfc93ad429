/**
 * `site-tokens create --pool POOL [--uses N] [--ttl DURATION] [--pre-approved] [--out FILE]`:
 * siteTokens.create. A site token is a join token whose machine becomes its site's agent, so this
 * is join-tokens create's command with the other method: --out writes the one-time token to a new
 * 0600 file created before the call (an existing file is ALREADY_EXISTS and nothing is minted).
 */
import { defineCommand } from '../../../define.js';
import { defined, keyFlag, mintToken, withIdempotencyKey } from '../../shared.js';

export default defineCommand({
  name: 'site-tokens create',
  group: 'Nodes',
  summary:
    'Mint a site token: the machine that joins with it becomes its site’s agent; --out writes it to a new 0600 file (siteTokens.create)',
  target: 'token',
  calls: ['siteTokens.create'],
  flags: {
    pool: {
      type: 'id',
      kind: 'pool',
      required: true,
      description: 'A pool of the site; the agent is recorded there and never takes work',
    },
    uses: {
      type: 'number',
      integer: true,
      min: 1,
      max: 100,
      description: 'How many agents may join with it (default 1)',
      placeholder: 'N',
    },
    ttl: {
      type: 'duration',
      min: '1m',
      max: '30d',
      description: 'How long it stays valid, 1m to 30d (default 1d)',
      placeholder: 'DURATION',
    },
    preApproved: {
      type: 'boolean',
      description: 'The agent becomes a node at once, without a join request to approve',
    },
    description: { type: 'string', description: 'What it is for', placeholder: 'TEXT' },
    out: {
      type: 'string',
      description: 'Write the one-time token to this new file (mode 0600) instead of printing it',
      placeholder: 'FILE',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute site-tokens create --pool pool_01k… --out site.token',
    'bcd join --url https://compute.example.com --token-file site.token',
  ],
  async run(context) {
    const { flags, io, api } = context;
    const input = defined({
      poolId: flags.pool,
      uses: flags.uses,
      lifetimeSeconds: flags.ttl,
      preApproved: flags.preApproved ? true : undefined,
      description: flags.description,
    });
    const create = () =>
      withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
        (await api()).call('siteTokens.create', { ...input, idempotencyKey }),
      );
    return mintToken(io.cwd, flags.out, create, (answer) => ({ siteToken: answer.siteToken }));
  },
});
