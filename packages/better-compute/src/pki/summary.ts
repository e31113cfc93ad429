/**
 * What `pki show` prints: every key's purpose, algorithm, pin and dates, the SSH CAs' public key
 * lines, the machine CAs' certificates, the rotation statements and the quorum's approver set.
 * Public material only: no private key and no sealed blob ever reaches this object.
 */
import type { ApproverSet } from '@better-compute/core/quorum';
import type { PkiBundle, PkiKey } from './bundle.js';
import { EXPIRY_WARNING_DAYS } from './doctor.js';

interface PkiKeySummary {
  key: string;
  algorithm: string;
  pin: string;
  createdAt: string;
  notAfter?: string;
  status: string;
}

export interface PkiSummary {
  path: string;
  trustDomain: string;
  createdAt: string;
  updatedAt: string;
  keys: PkiKeySummary[];
  machineCas: {
    pin: string;
    serialNumber: string;
    subject: string;
    notBefore: string;
    notAfter: string;
    current: boolean;
    trusted: boolean;
    certificate: string;
  }[];
  commandRoot: { pin: string; publicKey: string };
  previousCommandRoots: { pin: string; createdAt: string; retiredAt: string; publicKey: string }[];
  commandRootRotations: { from: string; to: string; at: string; statement: string; signature: string }[];
  sshCas: { key: string; pin: string; sshPublicKey: string }[];
  auditPin: string | null;
  /** The destructive-batch quorum's current approver set, or null when the quorum is off. */
  approvers: {
    epoch: number;
    threshold: number;
    kids: string[];
    /** The set as published: the `--current` file of `batch sign-approvers`. */
    set: ApproverSet;
    /** Every set of the chain, oldest first, with the current approvers that signed each change. */
    history: { epoch: number; threshold: number; kids: string[]; signedBy: string[] }[];
  } | null;
}

function pem(key: PkiKey['publicKey']): string {
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

export function summarizeBundle(bundle: PkiBundle, now = new Date()): PkiSummary {
  const trusted = new Set(bundle.trustedMachineCas(now).map((ca) => ca.pin));
  const soon = now.getTime() + EXPIRY_WARNING_DAYS * 24 * 60 * 60 * 1000;
  const caStatus = (pin: string, notAfter: string, current: boolean): string => {
    if (!trusted.has(pin)) return Date.parse(notAfter) <= now.getTime() ? 'expired' : 'not yet valid';
    const expiring = Date.parse(notAfter) <= soon ? ', expires within 30 days' : '';
    return `${current ? 'issuing' : 'trusted (overlap)'}${expiring}`;
  };
  const row = (key: string, value: PkiKey, status: string): PkiKeySummary => ({
    key,
    algorithm: value.algorithm,
    pin: value.pin,
    createdAt: value.createdAt,
    status,
  });
  return {
    path: bundle.path,
    trustDomain: bundle.trustDomain,
    createdAt: bundle.createdAt,
    updatedAt: bundle.updatedAt,
    keys: [
      ...bundle.machineCas.map((ca, i) => ({
        ...row('machine-ca', ca, caStatus(ca.pin, ca.notAfter, i === 0)),
        notAfter: ca.notAfter,
      })),
      row('command-root', bundle.commandRoot, 'signing'),
      ...bundle.previousCommandRoots.map((old) => ({
        key: 'command-root',
        algorithm: old.algorithm,
        pin: old.pin,
        createdAt: old.createdAt,
        status: `retired ${old.retiredAt}`,
      })),
      row('exec-ticket', bundle.execTicket, 'signing'),
      row('break-glass-ssh-ca', bundle.breakGlassSshCa, 'signing'),
      ...(bundle.sandboxSshCa ? [row('sandbox-ssh-ca', bundle.sandboxSshCa, 'signing')] : []),
      ...(bundle.audit ? [row('audit', bundle.audit, 'signing')] : []),
    ],
    machineCas: bundle.machineCas.map((ca, i) => ({
      pin: ca.pin,
      serialNumber: ca.serialNumber,
      subject: ca.subject,
      notBefore: ca.notBefore,
      notAfter: ca.notAfter,
      current: i === 0,
      trusted: trusted.has(ca.pin),
      certificate: ca.certificatePem,
    })),
    commandRoot: { pin: bundle.commandRoot.pin, publicKey: pem(bundle.commandRoot.publicKey) },
    previousCommandRoots: bundle.previousCommandRoots.map((old) => ({
      pin: old.pin,
      createdAt: old.createdAt,
      retiredAt: old.retiredAt,
      publicKey: pem(old.publicKey),
    })),
    commandRootRotations: bundle.commandRootRotations.map((rotation) => ({ ...rotation })),
    sshCas: [
      {
        key: 'break-glass-ssh-ca',
        pin: bundle.breakGlassSshCa.pin,
        sshPublicKey: bundle.breakGlassSshCa.sshPublicKey,
      },
      ...(bundle.sandboxSshCa
        ? [
            {
              key: 'sandbox-ssh-ca',
              pin: bundle.sandboxSshCa.pin,
              sshPublicKey: bundle.sandboxSshCa.sshPublicKey,
            },
          ]
        : []),
    ],
    auditPin: bundle.audit?.pin ?? null,
    approvers: approversOf(bundle),
  };
}

function approversOf(bundle: PkiBundle): PkiSummary['approvers'] {
  const current = bundle.approvers.at(-1)?.set;
  if (!current) return null;
  const kidsOf = (set: ApproverSet) => set.approvers.map((approver) => approver.kid);
  return {
    epoch: current.epoch,
    threshold: current.threshold,
    kids: kidsOf(current),
    set: current,
    history: bundle.approvers.map(({ set, signatures }) => ({
      epoch: set.epoch,
      threshold: set.threshold,
      kids: kidsOf(set),
      signedBy: signatures.map((signature) => signature.kid),
    })),
  };
}
