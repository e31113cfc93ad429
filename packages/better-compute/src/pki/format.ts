/**
 * The PKI bundle file: its JSON shape, the checks a file must pass before anything trusts it, and
 * the one way it is written (a 0600 temporary file, then a link or a rename, so a reader never
 * sees half a bundle and `pki init` never replaces one without --force).
 */
import { constants } from 'node:fs';
import { link, mkdir, open, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';
import { ComputeError } from '@better-compute/core';
import type { RotationEntry } from '@better-compute/core/command-root';
import {
  type ApproverChainEntry,
  followApproverChain,
  MAX_APPROVER_CHAIN,
  MAX_APPROVERS,
  readApproverSet,
} from '@better-compute/core/quorum';
import { MIN_SCRYPT_N, type SealedKey, type SealParams } from './sealing.js';

export const PKI_FORMAT = 'better-compute.pki';
export const PKI_VERSION = 1;

export type KeyAlgorithm = 'Ed25519' | 'ECDSA-P256';

/** A key of the bundle: its public half (SPKI PEM), pin, and the sealed private half. */
export interface KeyEntry {
  pin: string;
  algorithm: KeyAlgorithm;
  createdAt: string;
  publicKey: string;
  sealedKey: SealedKey;
}

/** A machine CA: a key and its self-signed certificate. */
export interface CaEntry extends KeyEntry {
  certificate: string;
  serialNumber: string;
  subject: string;
  notBefore: string;
  notAfter: string;
}

/** An SSH certificate authority: a key and its OpenSSH public key line. */
export interface SshCaEntry extends KeyEntry {
  sshPublicKey: string;
}

/** A command root that was rotated out: public half only, its private key is discarded. */
interface RetiredKeyEntry {
  pin: string;
  algorithm: KeyAlgorithm;
  createdAt: string;
  retiredAt: string;
  publicKey: string;
}

export type { RotationEntry };

export interface PkiDocument {
  format: typeof PKI_FORMAT;
  version: typeof PKI_VERSION;
  trustDomain: string;
  createdAt: string;
  updatedAt: string;
  seal: SealParams;
  /** Newest first: the first issues certificates, every unexpired one is trusted. */
  machineCas: CaEntry[];
  commandRoot: KeyEntry;
  previousCommandRoots: RetiredKeyEntry[];
  commandRootRotations: RotationEntry[];
  execTicket: KeyEntry;
  breakGlassSshCa: SshCaEntry;
  sandboxSshCa?: SshCaEntry;
  audit?: KeyEntry;
  /**
   * The destructive-batch quorum's approver sets, oldest first (`pki approvers`): absent or empty
   * when the quorum is off. Public keys only; approvers keep their private keys.
   */
  approvers?: ApproverChainEntry[];
}

export function invalidBundle(path: string, why: string): ComputeError {
  return new ComputeError('PKI_INVALID', `the PKI bundle ${path} is not valid: ${why}`, {
    hint: 'Restore the file from a copy, or make a new one with "better-compute pki init --force" (daemons then need the new pins).',
  });
}

/** The error every PKI command gives when the bundle is not there. */
export function pkiNotFound(path: string): ComputeError {
  return new ComputeError('PKI_NOT_FOUND', `no PKI bundle at ${path}`, {
    hint: 'Run "better-compute pki init" (with BETTER_COMPUTE_SECRET set) to make one, or pass --pki PATH.',
  });
}

type Checker = (value: unknown, where: string) => void;

function fail(path: string, where: string, what: string): never {
  throw invalidBundle(path, `${where} ${what}`);
}

/**
 * Checks the shape of a parsed file; the pins and keys, and the approver chain's signatures
 * (`readApproverChain`), are checked when the bundle is built.
 */
export function checkDocument(value: unknown, path: string): PkiDocument {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  const str: Checker = (v, where) => {
    if (typeof v !== 'string' || v.length === 0 || v.length > 64 * 1024)
      fail(path, where, 'must be a string');
  };
  const time: Checker = (v, where) => {
    str(v, where);
    if (Number.isNaN(Date.parse(v as string))) fail(path, where, 'must be a time');
  };
  const sealed: Checker = (v, where) => {
    if (!isObject(v)) fail(path, where, 'must be a sealed key');
    if (typeof v.v !== 'number') fail(path, `${where}.v`, 'must be a number');
    for (const field of ['iv', 'ct', 'tag']) str(v[field], `${where}.${field}`);
  };
  const key = (v: unknown, where: string): void => {
    if (!isObject(v)) fail(path, where, 'must be an object');
    str(v.pin, `${where}.pin`);
    if (v.algorithm !== 'Ed25519' && v.algorithm !== 'ECDSA-P256')
      fail(path, `${where}.algorithm`, 'is unknown');
    time(v.createdAt, `${where}.createdAt`);
    str(v.publicKey, `${where}.publicKey`);
    sealed(v.sealedKey, `${where}.sealedKey`);
  };
  if (!isObject(value)) fail(path, 'the file', 'is not a JSON object');
  if (value.format !== PKI_FORMAT) fail(path, 'format', `must be "${PKI_FORMAT}"`);
  if (value.version !== PKI_VERSION)
    throw new ComputeError(
      'PKI_INVALID',
      `the PKI bundle ${path} is version ${String(value.version)}; this release reads version ${PKI_VERSION}`,
      {
        hint: 'Use the better-compute release that wrote it, or a newer one.',
      },
    );
  str(value.trustDomain, 'trustDomain');
  time(value.createdAt, 'createdAt');
  time(value.updatedAt, 'updatedAt');
  const seal = value.seal;
  if (!isObject(seal) || seal.kdf !== 'scrypt') fail(path, 'seal', 'must name the scrypt key derivation');
  for (const field of ['N', 'r', 'p'])
    if (!Number.isSafeInteger(seal[field]) || (seal[field] as number) < 1)
      fail(path, `seal.${field}`, 'must be a positive integer');
  const n = seal.N as number;
  if (n < MIN_SCRYPT_N || (n & (n - 1)) !== 0 || n > 2 ** 20)
    fail(path, 'seal.N', 'must be a power of two from 2^15 to 2^20');
  if ((seal.r as number) > 8 || (seal.p as number) > 4)
    fail(path, 'seal', 'r or p is too large (at most 8 and 4: at most 1 GiB of memory)');
  str(seal.salt, 'seal.salt');
  if (Buffer.from(seal.salt as string, 'base64').length < 16)
    fail(path, 'seal.salt', 'must be at least 16 bytes');
  if (!Array.isArray(value.machineCas) || value.machineCas.length === 0)
    fail(path, 'machineCas', 'must list a CA');
  value.machineCas.forEach((ca: unknown, i: number) => {
    key(ca, `machineCas[${i}]`);
    const entry = ca as Record<string, unknown>;
    for (const field of ['certificate', 'serialNumber', 'subject'])
      str(entry[field], `machineCas[${i}].${field}`);
    time(entry.notBefore, `machineCas[${i}].notBefore`);
    time(entry.notAfter, `machineCas[${i}].notAfter`);
  });
  key(value.commandRoot, 'commandRoot');
  key(value.execTicket, 'execTicket');
  key(value.breakGlassSshCa, 'breakGlassSshCa');
  str((value.breakGlassSshCa as Record<string, unknown>).sshPublicKey, 'breakGlassSshCa.sshPublicKey');
  if (value.sandboxSshCa !== undefined) {
    key(value.sandboxSshCa, 'sandboxSshCa');
    str((value.sandboxSshCa as Record<string, unknown>).sshPublicKey, 'sandboxSshCa.sshPublicKey');
  }
  if (value.audit !== undefined) key(value.audit, 'audit');
  if (!Array.isArray(value.previousCommandRoots)) fail(path, 'previousCommandRoots', 'must be a list');
  value.previousCommandRoots.forEach((entry: unknown, i: number) => {
    const where = `previousCommandRoots[${i}]`;
    if (!isObject(entry)) fail(path, where, 'must be an object');
    for (const field of ['pin', 'algorithm', 'publicKey']) str(entry[field], `${where}.${field}`);
    time(entry.createdAt, `${where}.createdAt`);
    time(entry.retiredAt, `${where}.retiredAt`);
  });
  if (!Array.isArray(value.commandRootRotations)) fail(path, 'commandRootRotations', 'must be a list');
  value.commandRootRotations.forEach((entry: unknown, i: number) => {
    const where = `commandRootRotations[${i}]`;
    if (!isObject(entry)) fail(path, where, 'must be an object');
    for (const field of ['from', 'to', 'statement', 'signature']) str(entry[field], `${where}.${field}`);
    time(entry.at, `${where}.at`);
  });
  return value as unknown as PkiDocument;
}

/**
 * Checks the `approvers` field (the destructive-batch quorum's chain of approver sets) and answers
 * it in its canonical form: each set as `readApproverSet` gives it (kids filled in, keys as
 * base64url SPKI, sorted by kid), each change's signatures as `{ kid, signature }`. The chain must
 * be what a daemon would accept from nothing pinned (`followApproverChain(null, chain)`: epoch 1
 * first, every change signed by a threshold of the set before it) and every set must be for the
 * bundle's own trust domain, so the server never publishes a chain its daemons would refuse.
 * Absent or empty: the quorum is off. PKI_INVALID otherwise.
 */
export function readApproverChain(value: unknown, trustDomain: string, path: string): ApproverChainEntry[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_APPROVER_CHAIN)
    fail(path, 'approvers', `must be a list of at most ${MAX_APPROVER_CHAIN} approver sets`);
  if (value.length === 0) return [];
  value.forEach((entry: unknown, i: number) => {
    const where = `approvers[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      fail(path, where, 'must be an object');
    const { signatures } = entry as Record<string, unknown>;
    if (!Array.isArray(signatures) || signatures.length > MAX_APPROVERS)
      fail(path, `${where}.signatures`, `must be a list of at most ${MAX_APPROVERS} signatures`);
    // The first set is installed by the operator (pki approvers --pub), not signed by anyone.
    if (i === 0 && signatures.length > 0)
      fail(path, `${where}.signatures`, 'must be empty: the first set is signed by no one');
    signatures.forEach((signature: unknown, j: number) => {
      const s = (typeof signature === 'object' && signature !== null ? signature : {}) as Record<
        string,
        unknown
      >;
      if (
        typeof s.kid !== 'string' ||
        s.kid.length > 64 ||
        typeof s.signature !== 'string' ||
        s.signature.length > 128
      )
        fail(path, `${where}.signatures[${j}]`, 'must be { kid, signature }');
    });
    const set = (entry as Record<string, unknown>).set as Record<string, unknown> | null | undefined;
    if (typeof set === 'object' && set !== null && set.trustDomain !== trustDomain)
      fail(path, `${where}.set.trustDomain`, `must be the bundle's trust domain ${trustDomain}`);
  });
  const verdict = followApproverChain(null, value);
  if (!verdict.ok) fail(path, 'approvers', `is not a valid approver chain: ${verdict.reason}`);
  return value.map(
    (entry: { set: unknown; signatures: { kid: string; signature: string }[] }, i: number) => ({
      set: readApproverSet(entry.set, `approvers[${i}].set`),
      signatures: entry.signatures.map(({ kid, signature }) => ({ kid, signature })),
    }),
  );
}

/** The bundle as written: stable key order, two-space indent, a final newline. */
function serializeDocument(document: PkiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/**
 * Writes the bundle atomically with mode 0600. `replace: false` links the temporary file into
 * place, which fails with ALREADY_EXISTS when a file is there; `replace: true` renames over it.
 */
export async function writeDocument(path: string, document: PkiDocument, replace: boolean): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    await handle.writeFile(serializeDocument(document), 'utf8');
    await handle.chmod(0o600);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    if (replace) {
      await rename(temporary, path);
    } else {
      try {
        await link(temporary, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
          throw new ComputeError(
            'ALREADY_EXISTS',
            `a PKI bundle already exists at ${path}; it was not replaced`,
            {
              hint: 'Pass --force to replace it (its keys are lost: daemons must be given the new pins), or --pki PATH for another file.',
            },
          );
        }
        throw error;
      }
      await unlink(temporary);
    }
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}
