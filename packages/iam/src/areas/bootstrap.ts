/**
 * Bootstrap: the first platform administrator of a deployment (once, while none exists), and the dev
 * accounts `dev` starts with (a root administrator, and an administrator and a member of tenant acme,
 * each with a password and an API key).
 */
import { ROOT_TENANT } from '@better-compute/core';
import type { DevAccount, Iam } from '../api.js';
import type { IamContext } from '../context.js';
import { newToken } from '../secrets.js';
import { createApiKey } from './api-keys.js';
import { createBinding } from './bindings.js';
import { rootAdministratorExists } from './platform-admins.js';
import { createPerson } from './principals.js';
import { createTenant, tenantRow } from './tenants.js';

export function bootstrapService(
  ctx: IamContext,
): Pick<Iam, 'hasRootAdministrator' | 'secretsSealed' | 'bootstrapRootAdmin' | 'bootstrapDev'> {
  const hasRootAdministrator = () => rootAdministratorExists(ctx.db);
  return {
    secretsSealed: () => ctx.sealer.sealed,
    hasRootAdministrator,
    async bootstrapRootAdmin(input) {
      if (await hasRootAdministrator()) return { created: false, principal: null };
      const principal = await createPerson(ctx, {
        tenantId: ROOT_TENANT,
        email: input.email,
        password: input.password,
        displayName: 'Root administrator',
      });
      await createBinding(ctx, { tenantId: ROOT_TENANT, role: 'platform-admin', principalId: principal.id });
      return { created: true, principal };
    },
    async bootstrapDev() {
      const account = async (tenantId: string, email: string, role: string): Promise<DevAccount> => {
        const password = newToken('').slice(0, 24);
        const principal = await createPerson(ctx, { tenantId, email, password });
        await createBinding(ctx, { tenantId, role, principalId: principal.id });
        const { key } = await createApiKey(ctx, principal.id, { name: 'dev' });
        return { tenantId, principalId: principal.id, email, password, role, apiKey: key };
      };
      const root = await ctx.db
        .selectFrom('iam.principals')
        .select('id')
        .where('tenant_id', '=', ROOT_TENANT)
        .where('kind', '=', 'person')
        .executeTakeFirst();
      if (root) return null;
      const rootAdmin = await account(ROOT_TENANT, 'admin@root.localhost', 'platform-admin');
      if ((await tenantRow(ctx, 'acme')) === undefined) await createTenant(ctx, { id: 'acme', name: 'Acme' });
      const acmeAdmin = await account('acme', 'admin@acme.localhost', 'tenant-admin');
      const acmeMember = await account('acme', 'member@acme.localhost', 'member');
      return { rootAdmin, acmeAdmin, acmeMember };
    },
  };
}
