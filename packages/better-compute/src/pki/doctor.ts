/**
 * doctor's PKI checks: the bundle is there and well formed, its keys open with the deployment
 * secret, it is readable by its owner only, no machine CA is expired (an error) or expires within
 * 30 days (a warning), and whether the destructive-batch quorum is on (its approver set, already
 * verified when the bundle was read).
 */
import { stat } from 'node:fs/promises';
import type { DoctorFinding } from '../types.js';
import { readPkiBundle } from './bundle.js';
import { type PinPurpose, pinMatches } from './pins.js';
import { ComputeError } from '@better-compute/core';

export const EXPIRY_WARNING_DAYS = 30;

export async function pkiFindings(options: {
  path: string;
  secret: string | undefined;
  now?: Date;
  /** The pins the database recorded (compute.pki_pins); undefined when it cannot be read. */
  recorded?: ReadonlyMap<PinPurpose, string> | undefined;
}): Promise<DoctorFinding[]> {
  const now = options.now ?? new Date();
  let bundle;
  try {
    bundle = await readPkiBundle(options.path);
  } catch (error) {
    const failure = error instanceof ComputeError ? error : undefined;
    return [
      {
        check: 'pki.present',
        severity: 'error',
        message:
          failure?.code === 'PKI_NOT_FOUND'
            ? `no PKI bundle at ${options.path}: run better-compute pki init (or set pki in the configuration)`
            : `${failure?.message ?? 'the PKI bundle cannot be read'}`,
      },
    ];
  }
  const findings: DoctorFinding[] = [
    { check: 'pki.present', severity: 'ok', message: `PKI bundle at ${bundle.path} (${bundle.trustDomain})` },
  ];
  const mode = (await stat(bundle.path)).mode & 0o777;
  findings.push(
    mode & 0o077
      ? {
          check: 'pki.permissions',
          severity: 'warning',
          message: `${bundle.path} is readable by other users (mode ${mode.toString(8)}): chmod 600 it`,
        }
      : { check: 'pki.permissions', severity: 'ok', message: 'the bundle is readable by its owner only' },
  );
  if (!options.secret) {
    findings.push({
      check: 'pki.unsealable',
      severity: 'warning',
      message: 'BETTER_COMPUTE_SECRET is not set: the bundle’s private keys cannot be opened here',
    });
  } else {
    const keys = [
      ['machine CA', bundle.machineCa],
      ['command root', bundle.commandRoot],
      ['exec ticket key', bundle.execTicket],
      ['break-glass SSH CA', bundle.breakGlassSshCa],
      ...(bundle.sandboxSshCa ? [['sandbox SSH CA', bundle.sandboxSshCa] as const] : []),
      ...(bundle.audit ? [['audit key', bundle.audit] as const] : []),
    ] as const;
    const failed: string[] = [];
    for (const [name, key] of keys) {
      try {
        await key.privateKey(options.secret);
      } catch {
        failed.push(name);
      }
    }
    findings.push(
      failed.length
        ? {
            check: 'pki.unsealable',
            severity: 'error',
            message: `BETTER_COMPUTE_SECRET does not open: ${failed.join(', ')}`,
          }
        : {
            check: 'pki.unsealable',
            severity: 'ok',
            message: `all ${keys.length} private keys open with the secret`,
          },
    );
  }
  const missing = [
    !bundle.sandboxSshCa && 'sandbox SSH CA (pki add-sandbox-ca)',
    !bundle.audit && 'audit key',
  ].filter(Boolean);
  findings.push(
    missing.length
      ? { check: 'pki.complete', severity: 'warning', message: `the bundle has no ${missing.join(', no ')}` }
      : { check: 'pki.complete', severity: 'ok', message: 'every key of the bundle is present' },
  );
  // Off is a choice, not a fault: the quorum is optional (docs/quorum.md), so it is never a warning.
  const quorum = bundle.approvers.at(-1)?.set;
  findings.push({
    check: 'pki.quorum',
    severity: 'ok',
    message: quorum
      ? `the destructive-batch quorum is on: approver set epoch ${quorum.epoch}, ${quorum.threshold} of ${quorum.approvers.length} approvers sign each batch`
      : 'the destructive-batch quorum is off (no approver set): better-compute pki approvers turns it on',
  });
  const soon = now.getTime() + EXPIRY_WARNING_DAYS * 24 * 60 * 60 * 1000;
  const current = bundle.machineCa;
  const expiresAt = Date.parse(current.notAfter);
  findings.push(
    expiresAt <= now.getTime()
      ? {
          check: 'pki.expiry',
          severity: 'error',
          message: `the machine CA ${current.pin} expired at ${current.notAfter}: run better-compute pki renew-ca`,
        }
      : Date.parse(current.notBefore) > now.getTime()
        ? {
            check: 'pki.expiry',
            severity: 'error',
            message: `the machine CA ${current.pin} is not valid before ${current.notBefore}: check this machine's clock`,
          }
        : expiresAt <= soon
          ? {
              check: 'pki.expiry',
              severity: 'warning',
              message: `the machine CA ${current.pin} expires at ${current.notAfter}, within ${EXPIRY_WARNING_DAYS} days: run better-compute pki renew-ca`,
            }
          : {
              check: 'pki.expiry',
              severity: 'ok',
              message: `the machine CA is valid until ${current.notAfter}`,
            },
  );
  if (options.recorded) {
    const recorded = options.recorded;
    const differing = [...recorded].filter(([purpose, pin]) => !pinMatches(bundle, purpose, pin));
    findings.push(
      differing.length
        ? {
            check: 'pki.pins',
            severity: 'error',
            message: `the bundle's ${differing.map(([purpose, pin]) => `${purpose} is not ${pin}`).join('; ')}, the pin this deployment recorded: the bundle was replaced, or is not this deployment's`,
          }
        : {
            check: 'pki.pins',
            severity: 'ok',
            message: recorded.size
              ? `the bundle matches the ${recorded.size} pin(s) this deployment recorded`
              : 'no pins recorded yet (serve records them on its first start with the bundle)',
          },
    );
  }
  return findings;
}
