/**
 * Making keys for the bundle and the bundle itself (`pki init`, and `dev` on its first start).
 */
import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { algorithmOf, type PkiBundle, pkiBundleFromDocument, publicKeyPin } from './bundle.js';
import { checkTrustDomain, createCaCertificate, newP256Key } from './certificates.js';
import {
  type CaEntry,
  type KeyEntry,
  PKI_FORMAT,
  PKI_VERSION,
  type PkiDocument,
  type SshCaEntry,
  writeDocument,
} from './format.js';
import { type KeyPurpose, newSealParams, requireSecret, seal, type SealParams } from './sealing.js';
import { sshPublicKeyLine } from './ssh-ca.js';

export const DAY_MS = 24 * 60 * 60 * 1000;
/** A machine CA lives ten years by default; renew-ca overlaps the next one with it. */
export const CA_VALIDITY_DAYS = 3650;
const DEFAULT_TRUST_DOMAIN = 'better-compute.local';

export function newEd25519Key(): KeyObject {
  return generateKeyPairSync('ed25519').privateKey;
}

function publicKeyPem(key: KeyObject): string {
  return (key.type === 'public' ? key : createPublicKey(key))
    .export({ type: 'spki', format: 'pem' })
    .toString();
}

/** A key entry: public half, pin, and the private half sealed for `purpose`. */
export async function keyEntry(
  key: KeyObject,
  purpose: KeyPurpose,
  secret: string,
  params: SealParams,
  createdAt: Date,
): Promise<KeyEntry> {
  const pin = publicKeyPin(key);
  const der = key.export({ type: 'pkcs8', format: 'der' });
  return {
    pin,
    algorithm: algorithmOf(key)!,
    createdAt: createdAt.toISOString(),
    publicKey: publicKeyPem(key),
    sealedKey: await seal(der, secret, params, purpose, pin),
  };
}

/** A new machine CA valid from `notBefore` to `notAfter`, sealed. */
export async function caEntry(
  trustDomain: string,
  secret: string,
  params: SealParams,
  now: Date,
  notBefore: Date,
  notAfter: Date,
): Promise<CaEntry> {
  const key = newP256Key();
  const certificate = await createCaCertificate({ key, trustDomain, notBefore, notAfter });
  return {
    ...(await keyEntry(key, 'machine-ca', secret, params, now)),
    certificate: certificate.pem,
    serialNumber: certificate.serialNumber,
    subject: certificate.subject,
    notBefore: notBefore.toISOString(),
    notAfter: notAfter.toISOString(),
  };
}

/** A new OpenSSH CA (Ed25519) for `purpose`, sealed. */
export async function sshCaEntry(
  purpose: 'break-glass-ssh-ca' | 'sandbox-ssh-ca',
  trustDomain: string,
  secret: string,
  params: SealParams,
  now: Date,
): Promise<SshCaEntry> {
  const key = newEd25519Key();
  return {
    ...(await keyEntry(key, purpose, secret, params, now)),
    sshPublicKey: await sshPublicKeyLine(key, `${purpose}@${trustDomain}`),
  };
}

function commandRootKey(given: KeyObject | undefined): KeyObject {
  if (!given) return newEd25519Key();
  if (given.type !== 'private' || given.asymmetricKeyType !== 'ed25519')
    throw new ComputeError('INVALID_ARGUMENT', 'the command root must be an Ed25519 private key');
  return given;
}

export interface CreatePkiOptions {
  path: string;
  secret: string | undefined;
  trustDomain?: string | undefined;
  /** Replace an existing bundle. */
  force?: boolean;
  now?: Date;
  /** The machine CA's lifetime; tests make short or already expired ones. */
  caValidity?: { notBefore: Date; notAfter: Date };
  /** An existing Ed25519 key to keep as the command root (dev's key from before the bundle). */
  commandRootKey?: KeyObject | undefined;
}

/** Makes every key of a new bundle and writes it; ALREADY_EXISTS unless `force`. */
async function createPkiDocument(options: CreatePkiOptions): Promise<PkiDocument> {
  const secret = requireSecret(options.secret);
  const trustDomain = checkTrustDomain(options.trustDomain ?? DEFAULT_TRUST_DOMAIN);
  const now = options.now ?? new Date();
  const params = newSealParams();
  const validity = options.caValidity ?? {
    notBefore: new Date(now.getTime() - 5 * 60 * 1000),
    notAfter: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
  };
  const document: PkiDocument = {
    format: PKI_FORMAT,
    version: PKI_VERSION,
    trustDomain,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    seal: params,
    machineCas: [await caEntry(trustDomain, secret, params, now, validity.notBefore, validity.notAfter)],
    commandRoot: await keyEntry(commandRootKey(options.commandRootKey), 'command-root', secret, params, now),
    previousCommandRoots: [],
    commandRootRotations: [],
    execTicket: await keyEntry(newEd25519Key(), 'exec-ticket', secret, params, now),
    breakGlassSshCa: await sshCaEntry('break-glass-ssh-ca', trustDomain, secret, params, now),
    sandboxSshCa: await sshCaEntry('sandbox-ssh-ca', trustDomain, secret, params, now),
    audit: await keyEntry(newEd25519Key(), 'audit', secret, params, now),
  };
  await writeDocument(options.path, document, options.force === true);
  return document;
}

/** `createPkiDocument`, read back as a bundle. */
export async function createPkiBundle(options: CreatePkiOptions): Promise<PkiBundle> {
  const path = resolve(options.path);
  return pkiBundleFromDocument(await createPkiDocument({ ...options, path }), path);
}
