/**
 * `join-tokens revoke TOKEN_ID`: joinTokens.revoke. Anything with a `.` is a pasted token, not an
 * id, and is refused before anything is sent, so a secret never travels as an id.
 */
import { idShapeMessage, isId } from '@better-compute/core';
import { CliError } from '../../../errors.js';
import { defineCommand } from '../../../define.js';
import { assertNoSecret } from '../../shared.js';

export default defineCommand({
  name: 'join-tokens revoke',
  group: 'Nodes',
  summary:
    'Revoke a join token by its id, never the token itself; its waiting join requests are rejected (joinTokens.revoke)',
  target: 'token',
  calls: ['joinTokens.revoke'],
  positionals: [{ name: 'joinToken', description: 'The join token id (jtok_…)', required: true }],
  examples: ['better-compute join-tokens revoke jtok_01k…'],
  async run({ args, api }) {
    assertNoSecret('joinToken', args.joinToken);
    if (!isId('joinToken', args.joinToken))
      throw new CliError(
        'INVALID_ARGUMENT',
        `${idShapeMessage('joinToken', 'joinToken')} (got "${args.joinToken}")`,
        {
          hint: `Run "better-compute help join-tokens revoke" for its flags and examples.`,
          details: { field: 'joinToken' },
        },
      );
    return (await api()).call('joinTokens.revoke', { joinTokenId: args.joinToken });
  },
});
