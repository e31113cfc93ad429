/**
 * `batch keygen --out PATH`: a new P-256 approver key in PATH (PKCS#8 PEM, mode 0600, never written
 * over; encrypted with BETTER_COMPUTE_APPROVER_PASSPHRASE when it is set) and its public half in
 * PATH.pub; prints the kid the approver set will name it by.
 */
import { defineCommand } from '../../define.js';
import { claimKeyFiles } from '../files.js';
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
    const files = await claimKeyFiles(io, flags.out, 'an approver key is never written over');
    const passphrase = passphraseOf(io);
    const key = await files.fill(() => generateApproverKey(passphrase));
    return { kid: key.kid, ...files.paths, encrypted: passphrase !== undefined };
  },
});
