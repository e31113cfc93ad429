/**
 * The PKI bundle as the rest of the program sees it: every key's public half and pin, read and
 * checked from the file, and each private half opened only on request with the deployment secret.
 * What each key is for (docs/pki.md):
 *
 * - `machineCas`: ECDSA P-256 CAs that sign node and gateway certificates; the first one issues,
 *   every unexpired one is trusted (so `renew-ca` overlaps the old CA with the new);
 * - `commandRoot`: Ed25519, signs commands to daemons; `previousCommandRoots` and the rotation
 *   statements let a daemon that pinned an older root accept the current one;
 * - `execTicket`: Ed25519, signs single-use tunnel tickets;
 * - `breakGlassSshCa` and `sandboxSshCa`: Ed25519 OpenSSH CAs, separate so one never opens the
 *   other's machines;
 * - `audit`: Ed25519, signs audit checkpoints;
 * - `approvers`: the destructive-batch quorum's approver sets (public P-256 keys only: people hold
 *   the private halves), oldest first; empty when the quorum is off (docs/quorum.md).
 */
import { createPrivateKey, createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { publicKeyPin } from '@better-compute/core/command-root';
import { type ApproverChainEntry, decodePublicKey } from '@better-compute/core/quorum';
import {
  checkDocument,
  invalidBundle,
  pkiNotFound,
  readApproverChain,
  type CaEntry,
  type KeyAlgorithm,
  type KeyEntry,
  type PkiDocument,
  type RotationEntry,
  type SshCaEntry,
} from './format.js';
import { type KeyPurpose, type SealParams, unseal } from './sealing.js';

export const DEFAULT_PKI_PATH = '.better-compute/pki.json'; // relative to the cwd / config dir

/** 'sha256/' + base64 (standard, padded) of SHA-256 over the key's SubjectPublicKeyInfo DER. */
export { publicKeyPin };

export interface PkiKey {
  readonly pin: string;
  readonly publicKey: KeyObject;
  readonly algorithm: 'Ed25519' | 'ECDSA-P256';
  readonly createdAt: string;
  /** The private key, unsealed with the deployment secret; ComputeError on a wrong secret. */
  privateKey(secret: string): Promise<KeyObject>;
}

/** A machine CA: its key and self-signed certificate. */
interface PkiCertificateAuthority extends PkiKey {
  readonly certificatePem: string;
  readonly certificate: X509Certificate;
  readonly serialNumber: string;
  readonly subject: string;
  readonly notBefore: string;
  readonly notAfter: string;
}

/** An OpenSSH certificate authority. */
interface PkiSshCa extends PkiKey {
  /** `ssh-ed25519 AAAA… comment`, for TrustedUserCAKeys or @cert-authority lines. */
  readonly sshPublicKey: string;
}

/** A command root rotated out: only its public half is kept. */
interface PkiRetiredKey {
  readonly pin: string;
  readonly publicKey: KeyObject;
  readonly algorithm: KeyAlgorithm;
  readonly createdAt: string;
  readonly retiredAt: string;
}

export interface PkiBundle {
  readonly path: string;
  readonly trustDomain: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly audit: PkiKey | undefined; // Ed25519, signs audit checkpoints (C2SP signed note)
  readonly commandRoot: PkiKey; // Ed25519, signs commands to daemons
  /** Older command roots, newest first, each superseded by a signed rotation statement. */
  readonly previousCommandRoots: readonly PkiRetiredKey[];
  readonly commandRootRotations: readonly RotationEntry[];
  /** The CA that issues certificates now (the newest). */
  readonly machineCa: PkiCertificateAuthority;
  /** Every machine CA, newest first; those not yet expired are trusted. */
  readonly machineCas: readonly PkiCertificateAuthority[];
  readonly execTicket: PkiKey;
  readonly breakGlassSshCa: PkiSshCa;
  /** Absent in a bundle made before it existed (`pki add-sandbox-ca`). */
  readonly sandboxSshCa: PkiSshCa | undefined;
  /** The quorum's approver chain, oldest first (its last set is the current one); empty when off. */
  readonly approvers: readonly ApproverChainEntry[];
  /** The machine CAs to trust at `now`: every one whose validity covers it. */
  trustedMachineCas(now?: Date): PkiCertificateAuthority[];
  /** The parsed file, for the commands that change the bundle. */
  readonly document: PkiDocument;
}

/** The bundle path a command uses: --pki, else the configuration's `pki`, else the default, against `cwd`. */
export function resolvePkiPath(cwd: string, path?: string | undefined): string {
  const chosen = path && path.length > 0 ? path : DEFAULT_PKI_PATH;
  return isAbsolute(chosen) ? chosen : resolve(cwd, chosen);
}

/** Reads and checks the file; ComputeError('PKI_NOT_FOUND') when it does not exist. */
export async function readPkiBundle(path: string): Promise<PkiBundle> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = await readFile(absolute, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw pkiNotFound(absolute);
    throw new ComputeError('PKI_INVALID', `the PKI bundle ${absolute} cannot be read (${code ?? 'error'})`, {
      hint: 'Check the file is readable by this user (it should be mode 0600, owned by the account that runs better-compute).',
      cause: error,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidBundle(absolute, 'it is not JSON');
  }
  return pkiBundleFromDocument(checkDocument(parsed, absolute), absolute);
}

function keyOf(
  entry: KeyEntry,
  purpose: KeyPurpose,
  seal: SealParams,
  path: string,
  where: string,
  expected: KeyAlgorithm,
): PkiKey {
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey(entry.publicKey);
  } catch {
    throw invalidBundle(path, `${where}.publicKey is not a public key`);
  }
  if (entry.algorithm !== expected || algorithmOf(publicKey) !== expected)
    throw invalidBundle(path, `${where} must be an ${expected} key`);
  if (publicKeyPin(publicKey) !== entry.pin)
    throw invalidBundle(path, `${where}.pin does not match its public key`);
  const sealed = entry.sealedKey;
  return {
    pin: entry.pin,
    publicKey,
    algorithm: entry.algorithm,
    createdAt: entry.createdAt,
    async privateKey(secret: string): Promise<KeyObject> {
      const der = await unseal(sealed, secret, seal, purpose, entry.pin);
      const key = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
      // The AAD binds the pin, so this holds unless the bundle was forged with the secret itself.
      if (publicKeyPin(key) !== entry.pin)
        throw invalidBundle(path, `${where}'s private key does not match its pin`);
      return key;
    },
  };
}

/** The algorithm of a key: Ed25519, ECDSA-P256, or undefined for anything else. */
export function algorithmOf(key: KeyObject): KeyAlgorithm | undefined {
  if (key.asymmetricKeyType === 'ed25519') return 'Ed25519';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1')
    return 'ECDSA-P256';
  return undefined;
}

function caOf(entry: CaEntry, seal: SealParams, path: string, where: string): PkiCertificateAuthority {
  const key = keyOf(entry, 'machine-ca', seal, path, where, 'ECDSA-P256');
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(entry.certificate);
  } catch {
    throw invalidBundle(path, `${where}.certificate is not an X.509 certificate`);
  }
  if (publicKeyPin(certificate.publicKey) !== entry.pin)
    throw invalidBundle(path, `${where}.certificate is not for its key`);
  if (!certificate.ca || !certificate.verify(certificate.publicKey))
    throw invalidBundle(path, `${where}.certificate is not a self-signed CA certificate`);
  return {
    ...key,
    certificatePem: entry.certificate,
    certificate,
    serialNumber: entry.serialNumber,
    subject: entry.subject,
    notBefore: new Date(certificate.validFrom).toISOString(),
    notAfter: new Date(certificate.validTo).toISOString(),
  };
}

function sshCaOf(
  entry: SshCaEntry,
  purpose: KeyPurpose,
  seal: SealParams,
  path: string,
  where: string,
): PkiSshCa {
  return { ...keyOf(entry, purpose, seal, path, where, 'Ed25519'), sshPublicKey: entry.sshPublicKey };
}

/** Builds the bundle from a checked document: every pin is recomputed, every certificate parsed. */
export function pkiBundleFromDocument(document: PkiDocument, path: string): PkiBundle {
  const seal = document.seal;
  const machineCas = document.machineCas.map((entry, i) => caOf(entry, seal, path, `machineCas[${i}]`));
  const previousCommandRoots = document.previousCommandRoots.map((entry, i) => {
    let publicKey: KeyObject;
    try {
      publicKey = createPublicKey(entry.publicKey);
    } catch {
      throw invalidBundle(path, `previousCommandRoots[${i}].publicKey is not a public key`);
    }
    if (publicKeyPin(publicKey) !== entry.pin)
      throw invalidBundle(path, `previousCommandRoots[${i}].pin does not match its public key`);
    return {
      pin: entry.pin,
      publicKey,
      algorithm: entry.algorithm,
      createdAt: entry.createdAt,
      retiredAt: entry.retiredAt,
    };
  });
  const pins = new Set<string>();
  const bundle: PkiBundle = {
    path,
    trustDomain: document.trustDomain,
    createdAt: document.createdAt,
    updatedAt: document.updatedAt,
    document,
    machineCa: machineCas[0]!,
    machineCas,
    commandRoot: keyOf(document.commandRoot, 'command-root', seal, path, 'commandRoot', 'Ed25519'),
    previousCommandRoots,
    commandRootRotations: document.commandRootRotations,
    execTicket: keyOf(document.execTicket, 'exec-ticket', seal, path, 'execTicket', 'Ed25519'),
    breakGlassSshCa: sshCaOf(document.breakGlassSshCa, 'break-glass-ssh-ca', seal, path, 'breakGlassSshCa'),
    sandboxSshCa: document.sandboxSshCa
      ? sshCaOf(document.sandboxSshCa, 'sandbox-ssh-ca', seal, path, 'sandboxSshCa')
      : undefined,
    audit: document.audit ? keyOf(document.audit, 'audit', seal, path, 'audit', 'Ed25519') : undefined,
    approvers: readApproverChain(document.approvers, document.trustDomain, path),
    trustedMachineCas(now = new Date()) {
      return machineCas.filter(
        (ca) => Date.parse(ca.notBefore) <= now.getTime() && now.getTime() <= Date.parse(ca.notAfter),
      );
    },
  };
  // One key, one job: the same key in two slots would let one purpose's signature pass for another's.
  for (const key of [
    ...machineCas,
    bundle.commandRoot,
    bundle.execTicket,
    bundle.breakGlassSshCa,
    ...(bundle.sandboxSshCa ? [bundle.sandboxSshCa] : []),
    ...(bundle.audit ? [bundle.audit] : []),
  ]) {
    if (pins.has(key.pin)) throw invalidBundle(path, `the key ${key.pin} is used for two purposes`);
    pins.add(key.pin);
  }
  // An approver key must be a person's: were it one of the bundle's own keys (a machine CA is
  // P-256 too), whoever runs the server could sign approvals with it.
  for (const [i, entry] of bundle.approvers.entries())
    for (const approver of entry.set.approvers)
      if (pins.has(publicKeyPin(decodePublicKey(approver.publicKey)!)))
        throw invalidBundle(
          path,
          `approvers[${i}] lists ${approver.kid}, a key of the bundle itself: an approver key is held by a person, never by the server`,
        );
  return bundle;
}
