/** `pki reseal [--new-secret-from-env VAR]`: re-encrypt every key, in the current format or under a new secret. */
import { defineCommand } from '../../define.js';
import { bundlePath, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki reseal',
  group: 'PKI',
  summary: 'Re-seal every private key in the current format, or under a new secret',
  description:
    'Opens every key with BETTER_COMPUTE_SECRET, then seals them again under fresh scrypt parameters: with the ' +
    'same secret, or with the one in the environment variable --new-secret-from-env names (never an argument).',
  target: 'none',
  flags: {
    ...pkiFlag,
    newSecretFromEnv: {
      type: 'string',
      description: 'The environment variable that holds the new secret',
      placeholder: 'VAR',
    },
  },
  examples: [
    'better-compute pki reseal',
    'NEW_SECRET=… better-compute pki reseal --new-secret-from-env NEW_SECRET',
  ],
  async run({ flags, io }) {
    const { CliError } = await import('../../errors.js');
    const { requireSecret } = await import('../../../pki/sealing.js');
    const { resealBundle } = await import('../../../pki/rotation.js');
    let newSecret: string | undefined;
    if (flags.newSecretFromEnv !== undefined) {
      const name = flags.newSecretFromEnv;
      if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) {
        throw new CliError(
          'INVALID_ARGUMENT',
          '--new-secret-from-env takes the name of an environment variable',
          {
            hint: 'Put the new secret in a variable (NEW_SECRET=…) and pass its name: --new-secret-from-env NEW_SECRET.',
            details: { field: 'new-secret-from-env' },
          },
        );
      }
      newSecret = requireSecret(io.env[name], name);
      if (newSecret.length < 16) {
        throw new CliError('INVALID_ARGUMENT', `the new secret in ${name} is shorter than 16 characters`, {
          hint: 'Use a long random value, such as the output of "openssl rand -base64 32".',
          details: { field: 'new-secret-from-env' },
        });
      }
    }
    const bundle = await resealBundle(await bundlePath(io, flags.pki), secretOf(io), newSecret);
    return {
      path: bundle.path,
      resealed: bundle.machineCas.length + 3 + (bundle.sandboxSshCa ? 1 : 0) + (bundle.audit ? 1 : 0),
      kdf: bundle.document.seal.kdf,
      N: bundle.document.seal.N,
      newSecret: newSecret !== undefined,
      next:
        newSecret !== undefined
          ? `set BETTER_COMPUTE_SECRET to the value of ${flags.newSecretFromEnv} wherever this bundle is used`
          : undefined,
    };
  },
});
