/**
 * Passwords: a person changes their own (proving the current one; their other sessions end), or an
 * administrator sets a one-time password for them (audited; all their sessions end).
 */
import { ComputeError } from '@better-compute/core';
import type { Iam } from '../api.js';
import { change, type IamContext, notFound } from '../context.js';
import {
  principalIn,
  principalResource,
  recoveryAudit,
  requirePasswordSession,
  type RouteBindings,
} from '../routes.js';
import { hashPassword, newToken, verifyPassword } from '../secrets.js';
import { principalRow } from './principals.js';
import { recordRecovery } from './recovery-audit.js';
import { endSessions } from './sessions.js';

export function passwordService(ctx: IamContext): Pick<Iam, 'changePassword' | 'resetPassword'> {
  return {
    async changePassword(principalId, input) {
      const row = await ctx.db
        .selectFrom('iam.principals')
        .select(['kind', 'password_hash'])
        .where('id', '=', principalId)
        .executeTakeFirst();
      if (!row || row.kind !== 'person') throw notFound(`person ${principalId}`);
      if (!(await verifyPassword(input.currentPassword, row.password_hash)))
        throw new ComputeError('UNAUTHENTICATED', 'the current password is wrong', {
          details: { field: 'currentPassword' },
        });
      if (input.newPassword.length < 8)
        throw new ComputeError('INVALID_ARGUMENT', 'the password must be at least 8 characters', {
          details: { field: 'newPassword' },
        });
      const passwordHash = await hashPassword(input.newPassword);
      const sessionsEnded = await change<number>(ctx, async (trx) => {
        await trx
          .updateTable('iam.principals')
          .set({ password_hash: passwordHash })
          .where('id', '=', principalId)
          .execute();
        const ended = await endSessions(ctx, trx, principalId, input.keepSessionId);
        return { result: ended.length, changes: ended.map((id) => ({ type: 'credential' as const, id })) };
      });
      return { changed: true as const, sessionsEnded };
    },
    async resetPassword(principalId, audit) {
      const row = await principalRow(ctx, principalId);
      if (!row || row.kind !== 'person') throw notFound(`person ${principalId}`);
      const oneTimePassword = newToken('otp_').slice(0, 28);
      const passwordHash = await hashPassword(oneTimePassword);
      const sessionsEnded = await change<number>(ctx, async (trx) => {
        await trx
          .updateTable('iam.principals')
          .set({ password_hash: passwordHash })
          .where('id', '=', principalId)
          .execute();
        await recordRecovery(ctx, trx, {
          tenantId: row.tenant_id,
          action: 'passwords.reset',
          principalId,
          audit,
        });
        const ended = await endSessions(ctx, trx, principalId);
        return { result: ended.length, changes: ended.map((id) => ({ type: 'credential' as const, id })) };
      });
      return { oneTimePassword, sessionsEnded };
    },
  };
}

export function passwordRoutes(iam: Iam): RouteBindings<'passwords.change' | 'passwords.reset'> {
  return {
    'passwords.change': {
      async run(input, context) {
        const identity = requirePasswordSession(context);
        return {
          data: await iam.changePassword(identity.principalId, {
            currentPassword: input.currentPassword,
            newPassword: input.newPassword,
            // The session it is changed from stays; a JWT's session is the one it was issued from.
            ...(identity.credentialKind === 'session' ? { keepSessionId: identity.credentialId } : {}),
          }),
        };
      },
    },
    'passwords.reset': {
      resource: (input, { tenantId }) => principalResource(input.principalId, tenantId),
      async run(input, context) {
        const person = await principalIn(iam, input.principalId, context.tenantId);
        return { data: await iam.resetPassword(person.id, recoveryAudit(context)) };
      },
    },
  };
}
