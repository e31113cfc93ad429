/**
 * Break-glass SSH: methods of the `nodes` group, declared here beside their own schemas. A person
 * sends their public key and gets a short-lived OpenSSH user certificate, signed by the PKI
 * bundle's break-glass SSH CA, that opens one account on one node. Issued certificates are
 * recorded, listed ("who holds access") and revocable; the node's daemon keeps sshd's trusted CA
 * and revocation list current.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';

/** A Unix account name as useradd accepts it (and nothing ssh would read as an option). */
export const UNIX_ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;
export const unixAccount = z.string().regex(UNIX_ACCOUNT, 'must be a Unix account name such as root');
export const SSH_CERT_MIN_MINUTES = 1;
export const SSH_CERT_MAX_MINUTES = 60;

const sshCertState = z.enum(['active', 'expired', 'revoked']);

export const sshCertSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  nodeId: z.string(),
  /** The person (or principal) it was issued to. */
  holder: z.string(),
  holderName: z.string().nullable(),
  account: z.string(),
  /** The certificate's one principal: `<account>@<nodeId>`, what the node's sshd accepts for the account. */
  principal: z.string(),
  /** The certificate's key id, naming the holder; sshd logs it at each login. */
  keyId: z.string(),
  serial: z.string(),
  /** SHA256 fingerprint of the certified public key. */
  fingerprint: z.string(),
  issuedAt: isoTime,
  validAfter: isoTime,
  validBefore: isoTime,
  state: sshCertState,
  revokedAt: isoTime.nullable(),
  revokedBy: z.string().nullable(),
  revocationReason: z.string().nullable(),
});

const issueSshCert = method({
  kind: 'mutation',
  summary: 'Sign your public key as a short-lived OpenSSH certificate for one account on one node',
  access: { action: 'compute:nodes:ssh-root' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      /** An OpenSSH public key line (`ssh-ed25519 AAAA… comment`); never a private key. */
      publicKey: z
        .string()
        .min(1)
        .max(16_384)
        .describe('Your OpenSSH public key line, like ssh-ed25519 AAAA… comment; never a private key'),
      account: unixAccount
        .default('root')
        .describe('The Unix account on the node the certificate opens, like root'),
      minutes: z
        .number()
        .int()
        .min(SSH_CERT_MIN_MINUTES)
        .max(SSH_CERT_MAX_MINUTES)
        .default(15)
        .describe('How long the certificate is valid, in minutes (1 to 60)'),
    })
    .strict(),
  output: sshCertSchema.extend({
    /** The certificate, `ssh-ed25519-cert-v01@openssh.com AAAA…`, to save as `<key>-cert.pub`. */
    certificate: z.string(),
    /** The CA's public key, as the node's TrustedUserCAKeys holds it. */
    caPublicKey: z.string(),
  }),
});

const listSshCerts = method({
  kind: 'query',
  summary: 'Who holds SSH access to a node: its certificates, newest first',
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-node', id: input.nodeId }),
  input: z
    .object({
      tenantId,
      nodeId: idOf('node'),
      includeExpired: z.boolean().default(false).describe('Also list certificates past their expiry'),
      ...pageInputById('sshCert'),
    })
    .strict(),
  output: pageOf(sshCertSchema),
});

const revokeSshCert = method({
  kind: 'mutation',
  summary: 'Revoke an SSH certificate: the node refuses it from its next login',
  access: { action: 'compute:nodes:ssh-revoke' },
  tenantScoped: true,
  resource: (input) => ({ type: 'compute-ssh-cert', id: input.sshCertId }),
  input: z
    .object({
      tenantId,
      sshCertId: idOf('sshCert'),
      reason: z
        .string()
        .max(500)
        .optional()
        .describe('Why it is revoked, kept on the certificate (up to 500 characters)'),
    })
    .strict(),
  output: sshCertSchema,
});

/** The break-glass methods of the `nodes` group (`nodes.issueSshCert`, …). */
export const nodeSshCertsGroup = defineGroup(
  'nodes',
  { module: 'fleet' },
  { issueSshCert, listSshCerts, revokeSshCert },
);
