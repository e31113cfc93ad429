/**
 * `batch keygen --out PATH`: a new P-256 approver key in PATH (PKCS#8 PEM, mode 0600, never written
 * over; encrypted with BETTER_COMPUTE_APPROVER_PASSPHRASE when it is set) and its public half in
 * PATH.pub; prints the kid the approver set will name it by.
 */
import { defineCommand } from '../../define.js';
import { createOutFile } from '../shared.js';
import { PASSPHRASE_ENV, passphraseOf } from './files.js';

export default defineCommand({
  name: 'batch keygen',
  group: 'Batches',
  summary: 'Make a P-256 approver key (mode 0600, never written over) and PATH.pub; print its kid',
  description: `The key is encrypted (PKCS#8, AES-256-CBC) when ${PASSPHRASE_ENV} is set; keep it off the server.`,
  target: 'none',
  flags: {
    out: {
      type: 'string',
      required: true,
      description:
        'A new file for the private key (mode 0600, never written over); the public key goes to PATH.pub',
      placeholder: 'PATH',
    },
  },
  examples: [
    'better-compute batch keygen --out ~/.better-compute/approver.pem',
    `${PASSPHRASE_ENV}=… better-compute batch keygen --out approver.pem`,
  ],
  async run({ flags, io }) {
    const { generateApproverKey } = await import('@better-compute/core/quorum');
    // Both files are claimed before the key is made, so a taken name leaves nothing behind.
    const privateFile = await createOutFile(io.cwd, flags.out, 'an approver key is never written over');
    let publicFile: Awaited<ReturnType<typeof createOutFile>>;
    try {
      publicFile = await createOutFile(io.cwd, `${flags.out}.pub`, 'an approver key is never written over');
    } catch (error) {
      await privateFile.discard();
      throw error;
    }
    const passphrase = passphraseOf(io);
    try {
      const key = generateApproverKey(passphrase);
      await privateFile.write(key.privatePem);
      await publicFile.write(key.publicPem);
      return {
        kid: key.kid,
        out: privateFile.path,
        publicKey: publicFile.path,
        encrypted: passphrase !== undefined,
      };
    } catch (error) {
      await Promise.all([privateFile.discard(), publicFile.discard()]);
      throw error;
    }
  },
});
