/**
 * `audit witness keygen --name NAME --out PATH`: a new Ed25519 witness key for cosignature/v1, in a
 * new file of mode 0600 (never written over), and its verifier key printed: what readers pass to
 * `audit verify --witness`. The name should be a schema-less URL naming the witness.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { createOutFile } from '../shared.js';

export default defineCommand({
  name: 'audit witness keygen',
  group: 'Audit',
  summary: 'Make a witness key (Ed25519, C2SP cosignature/v1) in a new 0600 file; print its verifier key',
  target: 'none',
  flags: {
    name: {
      type: 'string',
      required: true,
      description: 'The witness’s name, a schema-less URL such as witness.example.com/audit',
      placeholder: 'NAME',
    },
    out: {
      type: 'string',
      required: true,
      description: 'A new file for the private key (mode 0600, never written over)',
      placeholder: 'PATH',
    },
  },
  examples: ['better-compute audit witness keygen --name witness.example.com/audit --out witness.key'],
  async run({ flags, io }) {
    const { isKeyName } = await import('../../../audit/note.js');
    if (!isKeyName(flags.name) || flags.name.length > 200)
      throw new CliError('INVALID_ARGUMENT', `--name "${flags.name.slice(0, 200)}" is not a key name`, {
        hint: 'A key name has no spaces and no +, such as witness.example.com/audit.',
        details: { field: 'name' },
      });
    const file = await createOutFile(io.cwd, flags.out, 'a witness key is never written over');
    try {
      const { generateKeyPairSync } = await import('node:crypto');
      const { formatWitnessKey, witnessVerifierKey } = await import('../../../audit/cosignature.js');
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      await file.write(formatWitnessKey({ name: flags.name, privateKey, publicKey }));
      return { name: flags.name, verifierKey: witnessVerifierKey(flags.name, publicKey), out: file.path };
    } catch (error) {
      await file.discard();
      throw error;
    }
  },
});
