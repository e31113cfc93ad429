/**
 * The files the approver tools read: the approver key (refused when others can read it, as ssh
 * refuses a private key) and the JSON documents (scope, expectations, approver sets), each bounded
 * so a wrong path costs a message, not the machine's memory.
 */
import type { KeyObject } from 'node:crypto';
import type { ResolvedIO } from '../../define.js';
import { readPrivateKeyFile } from '../files.js';

export { readJsonFile, readTextFile, writeJsonOut } from '../files.js';

/** The environment variable that holds an approver key's passphrase; never a flag, so never in argv. */
export const PASSPHRASE_ENV = 'BETTER_COMPUTE_APPROVER_PASSPHRASE';

export function passphraseOf(io: ResolvedIO): string | undefined {
  const value = io.env[PASSPHRASE_ENV];
  return value === undefined || value === '' ? undefined : value;
}

/** Reads `--key PATH`: a regular file of at most 16 KiB, readable by its owner only. */
export async function readKeyFile(
  io: ResolvedIO,
  path: string,
): Promise<{ privateKey: KeyObject; kid: string }> {
  const { readApproverKey } = await import('@better-compute/core/quorum');
  const pem = await readPrivateKeyFile(
    io,
    path,
    'an approver key',
    'Make one with "better-compute batch keygen --out PATH".',
  );
  return readApproverKey(pem, path, passphraseOf(io));
}
