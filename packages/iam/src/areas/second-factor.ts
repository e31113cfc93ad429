/**
 * A person's second factor: TOTP enrolment and confirmation (the seed sealed at rest, each code
 * accepted once), the ten recovery codes a confirmed factor comes with, removal by the person with a
 * code, and an administrator's reset (audited).
 */
import * as OTPAuth from 'otpauth';
import { ComputeError } from '@better-compute/core';
import type { Iam } from '../api.js';
import type { Db, IamContext } from '../context.js';
import {
  principalIn,
  principalResource,
  recoveryAudit,
  requirePasswordSession,
  type RouteBindings,
} from '../routes.js';
import type { TotpTable } from '../schema.js';
import { hashToken } from '../secrets.js';
import { requirePrincipal } from './principals.js';
import { recordRecovery } from './recovery-audit.js';

/** How many recovery codes a confirmed second factor comes with. */
const RECOVERY_CODES = 10;
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/** A recovery code, `xxxxx-xxxxx`: 50 bits from a 31-letter alphabet without look-alikes. */
function newRecoveryCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  const letters = [...bytes].map((b) => RECOVERY_ALPHABET[b % RECOVERY_ALPHABET.length]).join('');
  return `${letters.slice(0, 5)}-${letters.slice(5)}`;
}

function totpOf(secret: string, label: string): OTPAuth.TOTP {
  return new OTPAuth.TOTP({
    issuer: 'Better IAM',
    label,
    secret: OTPAuth.Secret.fromBase32(secret),
    digits: 6,
    period: 30,
  });
}

/** The time step a code was valid for, or null; codes at or before `lastCounter` are replays. */
function totpCounter(
  ctx: IamContext,
  secret: string,
  code: string,
  lastCounter: number | null,
): number | null {
  const now = ctx.nowMs();
  const delta = totpOf(secret, 'check').validate({ token: code, timestamp: now, window: 1 });
  if (delta === null) return null;
  const counter = Math.floor(now / 30_000) + delta;
  if (lastCounter !== null && counter <= lastCounter) return null;
  return counter;
}

/**
 * Spends a second-factor code: a current TOTP code (remembering its counter, so it is not accepted
 * twice) or an unused recovery code (marked used). False when it is neither.
 */
export async function spendSecondFactor(
  ctx: IamContext,
  trx: Db,
  principalId: string,
  factor: Pick<TotpTable, 'secret' | 'last_counter'>,
  code: string,
): Promise<boolean> {
  if (/^\d{6}$/.test(code)) {
    const counter = totpCounter(
      ctx,
      ctx.sealer.open(factor.secret, `totp:${principalId}`),
      code,
      factor.last_counter,
    );
    if (counter === null) return false;
    await trx
      .updateTable('iam.totp')
      .set({ last_counter: counter })
      .where('principal_id', '=', principalId)
      .execute();
    return true;
  }
  const spent = await trx
    .updateTable('iam.recovery_codes')
    .set({ used_at: ctx.clock() })
    .where('principal_id', '=', principalId)
    .where('code_hash', '=', hashToken(code))
    .where('used_at', 'is', null)
    .returning('code_hash')
    .executeTakeFirst();
  return spent !== undefined;
}

/** A person's factor, confirmed or being enrolled, locked until the transaction ends. */
async function lockedFactor(trx: Db, principalId: string) {
  return trx
    .selectFrom('iam.totp')
    .select(['secret', 'confirmed', 'last_counter'])
    .where('principal_id', '=', principalId)
    .forUpdate()
    .executeTakeFirst();
}

/** Drops a person's factor and recovery codes; whether there was a factor. */
async function dropTotp(trx: Db, principalId: string): Promise<boolean> {
  await trx.deleteFrom('iam.recovery_codes').where('principal_id', '=', principalId).execute();
  const dropped = await trx
    .deleteFrom('iam.totp')
    .where('principal_id', '=', principalId)
    .returning('principal_id')
    .execute();
  return dropped.length > 0;
}

export function secondFactorService(
  ctx: IamContext,
): Pick<Iam, 'enrollTotp' | 'confirmTotp' | 'removeTotp' | 'resetTotp'> {
  const { db } = ctx;
  return {
    async enrollTotp(principalId) {
      const principal = await requirePrincipal(ctx, principalId);
      if (principal.kind !== 'person')
        throw new ComputeError('INVALID_STATE', 'only people enroll a TOTP second factor');
      const existing = await db
        .selectFrom('iam.totp')
        .select('confirmed')
        .where('principal_id', '=', principalId)
        .executeTakeFirst();
      if (existing?.confirmed) {
        throw new ComputeError('ALREADY_EXISTS', 'a TOTP second factor is already confirmed for this person');
      }
      const secret = new OTPAuth.Secret({ size: 20 }).base32;
      const sealed = ctx.sealer.seal(secret, `totp:${principalId}`);
      await db
        .insertInto('iam.totp')
        .values({ principal_id: principalId, secret: sealed, confirmed: false, created_at: ctx.clock() })
        .onConflict((oc) =>
          oc.column('principal_id').doUpdateSet({ secret: sealed, confirmed: false, last_counter: null }),
        )
        .execute();
      return { secret, uri: totpOf(secret, principal.email ?? principal.id).toString() };
    },
    async confirmTotp(principalId, code) {
      return db.transaction().execute(async (trx) => {
        const factor = await lockedFactor(trx, principalId);
        if (!factor)
          throw new ComputeError('INVALID_STATE', 'TOTP is not being enrolled', {
            hint: 'Call totp.enroll first.',
          });
        if (factor.confirmed) throw new ComputeError('ALREADY_EXISTS', 'TOTP is already confirmed');
        const counter = totpCounter(
          ctx,
          ctx.sealer.open(factor.secret, `totp:${principalId}`),
          code,
          factor.last_counter,
        );
        if (counter === null)
          throw new ComputeError('INVALID_ARGUMENT', 'invalid TOTP code', { details: { field: 'code' } });
        await trx
          .updateTable('iam.totp')
          .set({ confirmed: true, last_counter: counter })
          .where('principal_id', '=', principalId)
          .execute();
        const recoveryCodes = Array.from({ length: RECOVERY_CODES }, newRecoveryCode);
        await trx.deleteFrom('iam.recovery_codes').where('principal_id', '=', principalId).execute();
        await trx
          .insertInto('iam.recovery_codes')
          .values(
            recoveryCodes.map((code) => ({
              principal_id: principalId,
              code_hash: hashToken(code),
              used_at: null,
            })),
          )
          .execute();
        return { confirmed: true as const, recoveryCodes };
      });
    },
    async removeTotp(principalId, code) {
      return db.transaction().execute(async (trx) => {
        const factor = await lockedFactor(trx, principalId);
        if (!factor?.confirmed) return { removed: false };
        if (!(await spendSecondFactor(ctx, trx, principalId, factor, code)))
          throw new ComputeError('INVALID_ARGUMENT', 'invalid TOTP or recovery code', {
            details: { field: 'code' },
            hint: 'Give the current code from your authenticator, or one of your unused recovery codes; an administrator can reset a lost factor (totp.reset).',
          });
        return { removed: await dropTotp(trx, principalId) };
      });
    },
    async resetTotp(principalId, audit) {
      const principal = await requirePrincipal(ctx, principalId);
      if (principal.kind !== 'person')
        throw new ComputeError('INVALID_STATE', 'only people have a second factor');
      return db.transaction().execute(async (trx) => {
        const removed = await dropTotp(trx, principalId);
        await recordRecovery(ctx, trx, {
          tenantId: principal.tenant_id,
          action: 'totp.reset',
          principalId,
          audit,
        });
        return { removed };
      });
    },
  };
}

export function secondFactorRoutes(
  iam: Iam,
): RouteBindings<'totp.enroll' | 'totp.confirm' | 'totp.remove' | 'totp.reset'> {
  return {
    'totp.enroll': {
      async run(_input, context) {
        return { data: await iam.enrollTotp(requirePasswordSession(context).principalId) };
      },
    },
    'totp.confirm': {
      async run(input, context) {
        return { data: await iam.confirmTotp(requirePasswordSession(context).principalId, input.code) };
      },
    },
    'totp.remove': {
      async run(input, context) {
        return { data: await iam.removeTotp(requirePasswordSession(context).principalId, input.code) };
      },
    },
    'totp.reset': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, context) {
        const person = await principalIn(iam, input.principalId, context.tenantId);
        return { data: await iam.resetTotp(person.id, recoveryAudit(context)) };
      },
    },
  };
}
