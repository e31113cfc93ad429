/**
 * Changing a bundle: a new machine CA that overlaps the old (`renew-ca`), a new command root that
 * the old one vouches for (`rotate-command-root`), the sandbox SSH CA for a bundle made before it
 * existed (`add-sandbox-ca`), and re-sealing every key (`reseal`). Each proves the secret opens the
 * bundle before it changes anything, then replaces the file atomically in one write.
 */
import { type KeyObject, sign } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ComputeError } from '@better-compute/core';
import {
  followRotations,
  rotationStatementText,
  verifyRotationStatement,
} from '@better-compute/core/command-root';
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

export { followRotations, verifyRotationStatement };

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
