/**
 * `audit check-proof FILE [--pin P]`: checks a proof file offline, with no configuration and no
 * database: the entry's leaf hash, its inclusion under the checkpoint's root, the checkpoint's
 * signature under a key with the given pin, and any consistency proof. INVALID_PROOF names what
 * failed; AUDIT_KEY_MISSING when no pin is given and no bundle holds one.
 */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';
import { minWitnessesFlag, pinFlag, pkiFlag, trustedFlag, witnessFlag } from './flags.js';
import { witnessesWanted } from './witness-flags.js';

/** A proof is a few kilobytes (the hashes grow with the log's height); anything larger is not one. */
const MAX_PROOF_BYTES = 1 << 20;

export default defineCommand({
  name: 'audit check-proof',
  group: 'Audit',
  summary: 'Check an audit proof file offline against the audit key’s pin (no database)',
  target: 'none',
  positionals: [{ name: 'file', description: 'The proof file `audit prove` wrote', required: true }],
  flags: {
    pin: pinFlag,
    pki: pkiFlag,
    trusted: trustedFlag,
    witness: witnessFlag,
    minWitnesses: minWitnessesFlag,
  },
  examples: [
    'better-compute audit check-proof proof.json --pin sha256/…',
    'BETTER_COMPUTE_AUDIT_PIN=sha256/… better-compute audit check-proof proof.json',
    'better-compute audit check-proof proof.json --pin sha256/… --trusted kept.note',
    'better-compute audit check-proof proof.json --pin sha256/… --trusted cosigned.note --witness w1.example+1a2b3c4d+… --min-witnesses 1',
  ],
  async run({ args, flags, io }) {
    const [{ readFile, stat }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const { resolveAuditPin } = await import('../../../audit/keys.js');
    const { checkProof } = await import('../../../audit/check-proof.js');
    const witnesses = await witnessesWanted(flags);
    const { readTrustedFile } = await import('../../../audit/trusted.js');
    const trusted = flags.trusted
      ? { inputs: await readTrustedFile(io.cwd, flags.trusted), file: flags.trusted, witnesses }
      : undefined;
    let pin: string;
    try {
      pin = await resolveAuditPin({
        cwd: io.cwd,
        pin: flags.pin,
        env: io.env,
        pki: flags.pki ?? (io.env.BETTER_COMPUTE_PKI || undefined),
      });
    } catch (error) {
      if (error instanceof ComputeError && error.code === 'PKI_NOT_FOUND') {
        throw new ComputeError(
          'AUDIT_KEY_MISSING',
          'no audit key pin was given and no PKI bundle was found',
          {
            hint: 'Pass the pin the deployment published: --pin sha256/… (or BETTER_COMPUTE_AUDIT_PIN).',
          },
        );
      }
      throw error;
    }
    const path = resolve(io.cwd, args.file);
    let text: string;
    try {
      if ((await stat(path)).size > MAX_PROOF_BYTES) {
        throw new ComputeError('INVALID_PROOF', `${args.file} is larger than any proof (over 1 MiB)`);
      }
      text = await readFile(path, 'utf8');
    } catch (error) {
      if (error instanceof ComputeError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new ComputeError(
        code === 'ENOENT' ? 'NOT_FOUND' : 'INVALID_ARGUMENT',
        `cannot read ${args.file} (${code})`,
        {
          hint: 'Give the path of the file `better-compute audit prove --out` wrote.',
        },
      );
    }
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch {
      throw new ComputeError('INVALID_PROOF', `${args.file} is not JSON`, {
        hint: 'Give the file `better-compute audit prove --out` wrote, unchanged.',
      });
    }
    return checkProof(document, pin, trusted);
  },
});
