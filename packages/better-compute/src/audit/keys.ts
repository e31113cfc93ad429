/**
 * The audit key as the audit commands and the checkpoint job find it: the private half from the
 * PKI bundle, unsealed with the deployment secret (to sign); the pin of the public half from
 * `--pin`, BETTER_COMPUTE_AUDIT_PIN or the bundle (to verify).
 */
import { ComputeError } from '@better-compute/core';
import { readPkiBundle, resolvePkiPath } from '../pki/bundle.js';
import type { AuditSigningKey } from './seal.js';

export interface AuditSigner {
  key: AuditSigningKey;
  /** The bundle's trust domain: the first part of every checkpoint origin. */
  deployment: string;
  pin: string;
}

const PIN = /^sha256\/[A-Za-z0-9+/]{43}=$/;

function noAuditKey(path: string): ComputeError {
  return new ComputeError('AUDIT_KEY_MISSING', `the PKI bundle ${path} has no audit key`, {
    hint: 'Add one with `better-compute pki init` on a new deployment, or give the pin with --pin.',
  });
}

/** The bundle's audit key, unsealed with `secret`: what a checkpoint is signed with. */
export async function loadAuditSigner(options: {
  cwd: string;
  pki?: string | undefined;
  secret: string | undefined;
}): Promise<AuditSigner> {
  const bundle = await readPkiBundle(resolvePkiPath(options.cwd, options.pki));
  if (!bundle.audit) throw noAuditKey(bundle.path);
  if (!options.secret) {
    throw new ComputeError('MISSING_ENV', 'sealing the audit log needs the deployment secret', {
      hint: 'Set BETTER_COMPUTE_SECRET (or `secret` in the configuration) to the secret the bundle was sealed with.',
    });
  }
  const privateKey = await bundle.audit.privateKey(options.secret);
  return {
    key: { privateKey, publicKey: bundle.audit.publicKey },
    deployment: bundle.trustDomain,
    pin: bundle.audit.pin,
  };
}

/** Checks a pin's shape: `sha256/` and 44 characters of base64. */
function checkPin(pin: string, source: string): string {
  if (!PIN.test(pin)) {
    throw new ComputeError('INVALID_ARGUMENT', `${source} is not a key pin`, {
      hint: 'A pin looks like sha256/ followed by 44 characters of base64; `better-compute pki show` prints it.',
    });
  }
  return pin;
}

/**
 * The audit key's pin: `--pin`, else BETTER_COMPUTE_AUDIT_PIN, else the public half of the bundle.
 * PKI_NOT_FOUND when none is given and there is no bundle; AUDIT_KEY_MISSING when the bundle has
 * no audit key.
 */
export async function resolveAuditPin(options: {
  cwd: string;
  pin?: string | undefined;
  env: Record<string, string | undefined>;
  pki?: string | undefined;
}): Promise<string> {
  if (options.pin) return checkPin(options.pin, '--pin');
  const fromEnv = options.env.BETTER_COMPUTE_AUDIT_PIN;
  if (fromEnv) return checkPin(fromEnv, 'BETTER_COMPUTE_AUDIT_PIN');
  const bundle = await readPkiBundle(resolvePkiPath(options.cwd, options.pki));
  if (!bundle.audit) throw noAuditKey(bundle.path);
  return bundle.audit.pin;
}
