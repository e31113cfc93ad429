/**
 * Break-glass SSH: issuing, listing and revoking node-bound OpenSSH certificates. Every issue and
 * revocation queues an `ssh.trust` command for the node's daemon with the whole trust state (the
 * CA, the accounts certificates may open, the serials revoked and not yet expired), so the last
 * command the node ran always describes what its sshd must accept; a revocation needs to outlive
 * the certificate by no more than its 60 minutes, which is the command's lifetime.
 */
import { ComputeError, type Identity, newId } from '@better-compute/core';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { queueCommand } from '../commands/service.js';
import type { CallContext } from '../define-module.js';
import { loadNode } from '../fleet/nodes.js';
import { fleetDb } from '../fleet/tables.js';
import { newSerial, signUserCertificate } from './certificate.js';
import type { KeyLoader } from './keys.js';
import { type SshCertRow, sshCertsDb } from './tables.js';

/** How long an ssh.trust command may wait for its node: as long as any certificate lives. */
const TRUST_COMMAND_TTL_SECONDS = 3600;
/** Backdating against clock skew between the control plane and the node. */
const SKEW_MS = 60_000;

export interface SshCertSettings {
  keys: KeyLoader;
  /** Whether issuing needs a session opened with a second factor (default true). */
  requireMfa: boolean;
}

const iso = (value: Date | string) => new Date(value).toISOString();

function stateOf(row: SshCertRow, now: Date): 'active' | 'expired' | 'revoked' {
  if (row.revoked_at) return 'revoked';
  return new Date(row.valid_before).getTime() <= now.getTime() ? 'expired' : 'active';
}

function sshCertView(row: SshCertRow, now: Date) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    nodeId: row.node_id,
    holder: row.holder,
    holderName: row.holder_name,
    account: row.account,
    principal: row.principal,
    keyId: row.key_id,
    serial: row.serial,
    fingerprint: row.fingerprint,
    issuedAt: iso(row.issued_at),
    validAfter: iso(row.valid_after),
    validBefore: iso(row.valid_before),
    state: stateOf(row, now),
    revokedAt: row.revoked_at ? iso(row.revoked_at) : null,
    revokedBy: row.revoked_by,
    revocationReason: row.revocation_reason,
  };
}

/** The key id sshd logs: the certificate, its holder and what it opens, in plain characters. */
function keyIdOf(certId: string, identity: Identity, principal: string): string {
  const who = (identity.email ?? identity.displayName ?? '').replace(/[^A-Za-z0-9@._+-]/g, '');
  return `${certId} ${identity.principalId}${who ? ` ${who}` : ''} ${principal}`;
}

export async function issueSshCert(
  settings: SshCertSettings,
  ctx: CallContext<{ nodeId: string; publicKey: string; account: string; minutes: number }>,
) {
  const identity = ctx.identity!;
  if (identity.principalKind === 'agent')
    throw new ComputeError('ACCESS_DENIED', 'break-glass SSH certificates are issued to people, not agents', {
      details: { reason: 'agent' },
      hint: 'A person signs in and runs better-compute ssh-cert.',
    });
  if (settings.requireMfa && !identity.mfa)
    throw new ComputeError(
      'ACCESS_DENIED',
      'a break-glass SSH certificate needs a session opened with a second factor',
      {
        details: { reason: 'mfa-required' },
        hint: 'Sign in again with your TOTP code (better-iam login), then run ssh-cert with that session.',
      },
    );
  const node = await loadNode(fleetDb(ctx.db), ctx.tenantId, ctx.input.nodeId);
  if (node.state === 'retired')
    throw new ComputeError('INVALID_STATE', `node ${node.id} is retired; it takes no SSH logins`, {
      details: { state: node.state },
    });
  const now = ctx.now();
  let validBefore = new Date(now.getTime() + ctx.input.minutes * 60_000);
  if (identity.expiresAt !== null && Date.parse(identity.expiresAt) < validBefore.getTime())
    validBefore = new Date(Date.parse(identity.expiresAt));
  if (validBefore.getTime() - now.getTime() < 60_000)
    throw new ComputeError(
      'INVALID_STATE',
      'your session ends within a minute; a certificate cannot outlive it',
      {
        hint: 'Sign in again, then ask for the certificate.',
      },
    );
  const ca = await settings.keys.get('breakGlassSshCa');
  const id = newId('sshCert');
  const principal = `${ctx.input.account}@${node.id}`;
  const keyId = keyIdOf(id, identity, principal);
  const serial = newSerial();
  const validAfter = new Date(now.getTime() - SKEW_MS);
  const signed = await signUserCertificate({
    publicKey: ctx.input.publicKey,
    principal,
    keyId,
    serial,
    validAfter,
    validBefore,
    caPrivateKey: ca.privateKey,
  });
  const row = await sshCertsDb(ctx.db)
    .insertInto('compute.ssh_certs')
    .values({
      id,
      tenant_id: ctx.tenantId,
      node_id: node.id,
      holder: identity.principalId,
      holder_name: identity.email ?? identity.displayName ?? null,
      account: ctx.input.account,
      principal,
      key_id: keyId,
      serial: serial.toString(),
      fingerprint: signed.fingerprint,
      issued_at: now,
      valid_after: validAfter,
      valid_before: validBefore,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await queueTrust(ctx, node.id, ca.sshPublicKey!);
  ctx.emit({
    type: 'ssh_cert.issued',
    subject: { type: 'sshCert', id },
    data: {
      nodeId: node.id,
      holder: identity.principalId,
      account: ctx.input.account,
      fingerprint: signed.fingerprint,
      validBefore: iso(validBefore),
    },
  });
  return { ...sshCertView(row, now), certificate: signed.certificate, caPublicKey: ca.sshPublicKey! };
}

export async function listSshCerts(
  ctx: CallContext<{ nodeId: string; includeExpired: boolean; limit: number; cursor?: string | undefined }>,
) {
  await loadNode(fleetDb(ctx.db), ctx.tenantId, ctx.input.nodeId);
  const now = ctx.now();
  let query = sshCertsDb(ctx.db)
    .selectFrom('compute.ssh_certs')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .where('node_id', '=', ctx.input.nodeId)
    .orderBy('id', 'desc')
    .limit(ctx.input.limit + 1);
  if (!ctx.input.includeExpired)
    query = query.where('valid_before', '>', now).where('revoked_at', 'is', null);
  if (ctx.input.cursor) query = query.where('id', '<', ctx.input.cursor);
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map((row) => sshCertView(row, now)),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}

export async function revokeSshCert(
  settings: SshCertSettings,
  ctx: CallContext<{ sshCertId: string; reason?: string | undefined }>,
) {
  const db = sshCertsDb(ctx.db);
  const current = await db
    .selectFrom('compute.ssh_certs')
    .selectAll()
    .where('id', '=', ctx.input.sshCertId)
    .where('tenant_id', '=', ctx.tenantId)
    .forUpdate()
    .executeTakeFirst();
  if (!current)
    throw new ComputeError('NOT_FOUND', `SSH certificate ${ctx.input.sshCertId} does not exist`, {
      details: { id: ctx.input.sshCertId },
      hint: 'List a node’s certificates with better-compute api nodes.listSshCerts nodeId=… includeExpired:=true.',
    });
  const now = ctx.now();
  // Revoking twice keeps the first revocation's time, author and reason.
  if (current.revoked_at) return sshCertView(current, now);
  const reason = ctx.input.reason?.replace(/[\u0000-\u001f\u007f]/g, ' ').trim() || null;
  const row = await db
    .updateTable('compute.ssh_certs')
    .set({ revoked_at: now, revoked_by: ctx.identity!.principalId, revocation_reason: reason })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const ca = await settings.keys.get('breakGlassSshCa');
  await queueTrust(ctx, row.node_id, ca.sshPublicKey!);
  ctx.emit({
    type: 'ssh_cert.revoked',
    subject: { type: 'sshCert', id: row.id },
    data: { nodeId: row.node_id, holder: row.holder, reason },
  });
  return sshCertView(row, now);
}

/** What the node's sshd must accept now: the daemon's `ssh.trust` payload. */
async function trustState(db: Kysely<ComputeTables>, nodeId: string, caPublicKey: string, now: Date) {
  const live = await sshCertsDb(db)
    .selectFrom('compute.ssh_certs')
    .select(['account', 'serial', 'revoked_at'])
    .where('node_id', '=', nodeId)
    .where('valid_before', '>', now)
    .execute();
  const accounts = [...new Set(['root', ...live.map((row) => row.account)])].sort();
  return {
    caPublicKeys: [caPublicKey],
    principals: Object.fromEntries(accounts.map((account) => [account, [`${account}@${nodeId}`]])),
    revokedSerials: live
      .filter((row) => row.revoked_at !== null)
      .map((row) => row.serial)
      .sort(),
  };
}

async function queueTrust(ctx: CallContext<unknown>, nodeId: string, caPublicKey: string) {
  const node = await loadNode(fleetDb(ctx.db), ctx.tenantId, nodeId);
  if (node.state === 'retired') return;
  await queueCommand(
    ctx.db,
    {
      tenantId: ctx.tenantId,
      nodeId,
      kind: 'ssh.trust',
      payload: await trustState(ctx.db, nodeId, caPublicKey, ctx.now()),
      ttlSeconds: TRUST_COMMAND_TTL_SECONDS,
      now: ctx.now(),
    },
    ctx.emit,
  );
}
