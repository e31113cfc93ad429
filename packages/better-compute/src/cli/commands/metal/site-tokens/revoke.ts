/**
 * `site-tokens revoke TOKEN_ID`: siteTokens.revoke. Anything with a `.` is a pasted token, not an
 * id, and is refused before anything is sent, so a secret never travels as an id.
 */
import { idShapeMessage, isId } from '@better-compute/core';
import { CliError } from '../../../errors.js';
import { defineCommand } from '../../../define.js';
import { assertNoSecret } from '../../shared.js';

export default defineCommand({
  name: 'site-tokens revoke',
  group: 'Nodes',
  summary:
    'Revoke a site token by its id, never the token itself; its waiting join requests are rejected (siteTokens.revoke)',
  target: 'token',
  calls: ['siteTokens.revoke'],
  positionals: [{ name: 'siteToken', description: 'The site token id (stok_…)', required: true }],
  examples: ['better-compute site-tokens revoke stok_01k…'],
  async run({ args, api }) {
    assertNoSecret('siteToken', args.siteToken, {
      words: 'site token',
      prefix: 'stok',
      list: 'better-compute site-tokens create',
    });
    if (!isId('siteToken', args.siteToken))
      throw new CliError(
        'INVALID_ARGUMENT',
        `${idShapeMessage('siteToken', 'siteToken')} (got "${args.siteToken}")`,
        {
          hint: `Run "better-compute help site-tokens revoke" for its flags and examples.`,
          details: { field: 'siteToken' },
        },
      );
    return (await api()).call('siteTokens.revoke', { siteTokenId: args.siteToken });
  },
});
