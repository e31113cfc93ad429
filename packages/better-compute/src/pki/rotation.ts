/**
 * Changing a bundle: a new machine CA that overlaps the old (`renew-ca`), a new command root that
 * the old one vouches for (`rotate-command-root`), the sandbox SSH CA for a bundle made before it
 * existed (`add-sandbox-ca`), and re-sealing every key (`reseal`). Each proves the secret opens the
 * bundle before it changes anything, then replaces the file atomically in one write.
 */
import { createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ComputeError } from '@better-compute/core';
import { type PkiBundle, type PkiKey, pkiBundleFromDocument, publicKeyPin, readPkiBundle } from './bundle.js';
import { CA_VALIDITY_DAYS, caEntry, DAY_MS, keyEntry, newEd25519Key, sshCaEntry } from './create.js';
import { type KeyEntry, type PkiDocument, type RotationEntry, writeDocument } from './format.js';
import { type KeyPurpose, newSealParams, requireSecret, seal, type SealParams } from './sealing.js';

/** Opens one key with `secret`, so a wrong secret fails before anything is written. */
async function proveSecret(bundle: PkiBundle, secret: string | undefined): Promise<string> {
  const checked = requireSecret(secret);
  await bundle.commandRoot.privateKey(checked);
  return checked;
}

/** Writes `document` over the bundle it was read as; CONFLICT when the file changed since. */
export async function replaceBundle(bundle: PkiBundle, document: PkiDocument, now: Date): Promise<PkiBundle> {
  const next = { ...document, updatedAt: now.toISOString() };
  const built = pkiBundleFromDocument(next, bundle.path); // checks the result before it is written
  // Another command changed the bundle since it was read: its change is not silently undone.
  const onDisk = await readFile(bundle.path, 'utf8').catch(() => '');
  let same = false;
  try {
    same = JSON.stringify(JSON.parse(onDisk)) === JSON.stringify(bundle.document);
  } catch {
    same = false;
  }
  if (!same) {
    throw new ComputeError(
      'CONFLICT',
      `the PKI bundle ${bundle.path} changed while this command ran; nothing was written`,
      {
        hint: 'Run "better-compute pki show" to see it now, then run the command again.',
      },
    );
  }
  await writeDocument(bundle.path, next, true);
  return built;
}

/** A new machine CA, first in the list; the old ones stay trusted until they expire, then are dropped. */
export async function renewMachineCa(
  path: string,
  secret: string | undefined,
  options: { now?: Date; validityDays?: number } = {},
): Promise<{ bundle: PkiBundle; previous: string[] }> {
  const bundle = await readPkiBundle(path);
  const checked = await proveSecret(bundle, secret);
  const now = options.now ?? new Date();
  const days = options.validityDays ?? CA_VALIDITY_DAYS;
  const fresh = await caEntry(
    bundle.trustDomain,
    checked,
    bundle.document.seal,
    now,
    new Date(now.getTime() - 5 * 60 * 1000),
    new Date(now.getTime() + days * DAY_MS),
  );
  const kept = bundle.document.machineCas.filter((ca) => Date.parse(ca.notAfter) > now.getTime());
  const next = await replaceBundle(bundle, { ...bundle.document, machineCas: [fresh, ...kept] }, now);
  return { bundle: next, previous: kept.map((ca) => ca.pin) };
}

/** The text a rotation statement signs: the new root's key, bound to the old pin and the trust domain. */
export function rotationStatementText(trustDomain: string, from: string, to: KeyObject, at: string): string {
  const spki = (to.type === 'public' ? to : createPublicKey(to)).export({ type: 'spki', format: 'der' });
  return [
    'better-compute command-root rotation v1',
    `trust-domain: ${trustDomain}`,
    `from: ${from}`,
    `to: ${publicKeyPin(to)}`,
    `key: ${spki.toString('base64')}`,
    `at: ${at}`,
    '',
  ].join('\n');
}

/**
 * Checks one rotation statement against the key a verifier already trusts; returns the new
 * command root's public key, or throws PKI_INVALID_ROTATION.
 */
export function verifyRotationStatement(
  rotation: RotationEntry,
  trusted: KeyObject,
  trustDomain?: string,
): KeyObject {
  const refuse = (why: string): never => {
    throw new ComputeError(
      'PKI_INVALID_ROTATION',
      `the command-root rotation statement is not valid: ${why}`,
      {
        hint: 'Take the statement from the bundle that made it ("better-compute pki show --query commandRootRotations").',
      },
    );
  };
  const lines = rotation.statement.split('\n');
  if (lines[0] !== 'better-compute command-root rotation v1' || lines.length !== 7 || lines[6] !== '')
    refuse('it is not a version 1 statement');
  const field = (i: number, name: string): string => {
    const line = lines[i]!;
    if (!line.startsWith(`${name}: `)) refuse(`line ${i + 1} is not "${name}"`);
    return line.slice(name.length + 2);
  };
  const domain = field(1, 'trust-domain');
  const from = field(2, 'from');
  const to = field(3, 'to');
  const key = field(4, 'key');
  const at = field(5, 'at');
  if (trustDomain !== undefined && domain !== trustDomain) refuse('it is for another trust domain');
  if (from !== publicKeyPin(trusted) || from !== rotation.from)
    refuse('it is not signed by the trusted command root');
  if (to !== rotation.to || at !== rotation.at) refuse('its fields do not match the statement');
  let next: KeyObject;
  try {
    next = createPublicKey({ key: Buffer.from(key, 'base64'), format: 'der', type: 'spki' });
  } catch {
    return refuse('its key is not a public key');
  }
  if (next.asymmetricKeyType !== 'ed25519' || publicKeyPin(next) !== to)
    refuse('its key is not the Ed25519 key it names');
  const signature = Buffer.from(rotation.signature, 'base64');
  if (!verify(null, Buffer.from(rotation.statement, 'utf8'), trusted, signature))
    refuse('the signature does not verify under the old command root');
  return next;
}

/**
 * Follows the rotation statements from a pinned command root to the current one; returns the
 * current root's public key, or throws when the chain breaks.
 */
export function followRotations(
  pinned: KeyObject,
  rotations: readonly RotationEntry[],
  trustDomain?: string,
): KeyObject {
  let current = pinned;
  for (;;) {
    const pin = publicKeyPin(current);
    const step = rotations.find((rotation) => rotation.from === pin);
    if (!step) return current;
    current = verifyRotationStatement(step, current, trustDomain);
  }
}

/** A new command root, published with a statement signed by the old one; the old one is kept public only. */
export async function rotateCommandRoot(
  path: string,
  secret: string | undefined,
  options: { now?: Date } = {},
): Promise<{ bundle: PkiBundle; rotation: RotationEntry }> {
  const bundle = await readPkiBundle(path);
  const checked = requireSecret(secret);
  const oldKey = await bundle.commandRoot.privateKey(checked);
  const now = options.now ?? new Date();
  const at = now.toISOString();
  const newKey = newEd25519Key();
  const statement = rotationStatementText(bundle.trustDomain, bundle.commandRoot.pin, newKey, at);
  const rotation: RotationEntry = {
    from: bundle.commandRoot.pin,
    to: publicKeyPin(newKey),
    at,
    statement,
    signature: sign(null, Buffer.from(statement, 'utf8'), oldKey).toString('base64'),
  };
  const old = bundle.document.commandRoot;
  const document: PkiDocument = {
    ...bundle.document,
    commandRoot: await keyEntry(newKey, 'command-root', checked, bundle.document.seal, now),
    previousCommandRoots: [
      {
        pin: old.pin,
        algorithm: old.algorithm,
        createdAt: old.createdAt,
        retiredAt: at,
        publicKey: old.publicKey,
      },
      ...bundle.document.previousCommandRoots,
    ],
    commandRootRotations: [...bundle.document.commandRootRotations, rotation],
  };
  return { bundle: await replaceBundle(bundle, document, now), rotation };
}

/** Adds the sandbox SSH CA; ALREADY_EXISTS when the bundle has one. */
export async function addSandboxCa(
  path: string,
  secret: string | undefined,
  options: { now?: Date } = {},
): Promise<PkiBundle> {
  const bundle = await readPkiBundle(path);
  if (bundle.sandboxSshCa) {
    throw new ComputeError('ALREADY_EXISTS', `the PKI bundle ${bundle.path} already has a sandbox SSH CA`, {
      hint: 'Nothing was changed; "better-compute pki show" lists its pin and public key.',
      details: { pin: bundle.sandboxSshCa.pin },
    });
  }
  const checked = await proveSecret(bundle, secret);
  const now = options.now ?? new Date();
  const sandboxSshCa = await sshCaEntry(
    'sandbox-ssh-ca',
    bundle.trustDomain,
    checked,
    bundle.document.seal,
    now,
  );
  return replaceBundle(bundle, { ...bundle.document, sandboxSshCa }, now);
}

/**
 * Re-seals every private key: in the current format under fresh KDF parameters and salt, and
 * under `newSecret` when one is given. Every key is opened before anything is written.
 */
export async function resealBundle(
  path: string,
  secret: string | undefined,
  newSecret: string | undefined,
  options: { now?: Date } = {},
): Promise<PkiBundle> {
  const bundle = await readPkiBundle(path);
  const oldSecret = requireSecret(secret);
  const target = newSecret ?? oldSecret;
  const params = newSealParams();
  const document = bundle.document;
  const again = async <E extends KeyEntry>(entry: E, key: PkiKey, purpose: KeyPurpose): Promise<E> => {
    const privateKey = await key.privateKey(oldSecret);
    return { ...entry, sealedKey: await resealKey(privateKey, target, params, purpose, entry.pin) };
  };
  const next: PkiDocument = {
    ...document,
    seal: params,
    machineCas: await Promise.all(
      document.machineCas.map((entry, i) => again(entry, bundle.machineCas[i]!, 'machine-ca')),
    ),
    commandRoot: await again(document.commandRoot, bundle.commandRoot, 'command-root'),
    execTicket: await again(document.execTicket, bundle.execTicket, 'exec-ticket'),
    breakGlassSshCa: await again(document.breakGlassSshCa, bundle.breakGlassSshCa, 'break-glass-ssh-ca'),
  };
  if (document.sandboxSshCa && bundle.sandboxSshCa)
    next.sandboxSshCa = await again(document.sandboxSshCa, bundle.sandboxSshCa, 'sandbox-ssh-ca');
  if (document.audit && bundle.audit) next.audit = await again(document.audit, bundle.audit, 'audit');
  return replaceBundle(bundle, next, options.now ?? new Date());
}

function resealKey(key: KeyObject, secret: string, params: SealParams, purpose: KeyPurpose, pin: string) {
  return seal(key.export({ type: 'pkcs8', format: 'der' }), secret, params, purpose, pin);
}
