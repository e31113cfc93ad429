/**
 * IAM migration 0010 (docs/decisions/member-volumes.md): sandbox volumes are decided on
 * compute:sandbox-volumes:create, resize and delete instead of compute:sandboxes:volumes for all
 * three. The member role gets create and `*@own` in place of the compute:volumes:* patterns no
 * method checked, and roles and delegations written before keep what they allowed or held back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { migrate } from '@better-compute/db';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { BUILT_IN_ROLE_IDS, iamMigrations } from '../src/index.js';

const kinds = await testDatabaseKinds();
const BEFORE = { ...iamMigrations, migrations: iamMigrations.migrations.filter((m) => m.name < '0010') };

describe.each(kinds)('migration 0010, the volume actions, on %s', (kind) => {
  let database: TestDatabase;
  const actionsOf = async (id: string) =>
    (await sql<{ actions: string[] }>`select actions from iam.roles where id = ${id}`.execute(database.db))
      .rows[0]!.actions;

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    await migrate(database.db, [BEFORE]);
    // As the migrations' own statements are sent: several in one text, no parameters.
    await sql
      .raw(
        `
      insert into iam.tenants (id, parent_id, name) values ('acme', 'root', 'Acme');
      insert into iam.roles (id, tenant_id, name, actions) values
        ('role_0volumekeeper0000000000001', 'acme', 'volume-keeper', array['compute:sandboxes:volumes', 'compute:*:read']),
        ('role_0ownvolumes00000000000001', 'acme', 'own-volumes', array['compute:sandboxes:volumes@own']),
        ('role_0sandboxadmin000000000001', 'acme', 'sandbox-admin', array['compute:sandboxes:*']),
        ('role_0sandboxowner000000000001', 'acme', 'sandbox-owner', array['compute:sandboxes:*@own']),
        ('role_0reader00000000000000001', 'acme', 'reader', array['compute:*:read']);
      insert into iam.principals (id, tenant_id, kind, email, display_name) values
        ('usr_0person000000000000000001', 'acme', 'person', 'p@acme.test', 'P');
      insert into iam.principals (id, tenant_id, kind, display_name, acting_for) values
        ('agt_0agent0000000000000000001', 'acme', 'agent', 'A', 'usr_0person000000000000000001'),
        ('agt_0agent0000000000000000002', 'acme', 'agent', 'B', 'usr_0person000000000000000001');
      insert into iam.delegations (id, tenant_id, agent_id, person_id, confirm, created_by, created_at) values
        ('dlg_0one000000000000000000001', 'acme', 'agt_0agent0000000000000000001', 'usr_0person000000000000000001',
         array['compute:sandboxes:volumes'], 'test', now()),
        ('dlg_0two000000000000000000001', 'acme', 'agt_0agent0000000000000000002', 'usr_0person000000000000000001',
         array['compute:sandboxes:*'], 'test', now());
    `,
      )
      .execute(database.db);
    const result = await migrate(database.db, [iamMigrations]);
    expect(result.applied.map((m) => m.name)).toContain('0010_members_manage_their_own_volumes');
  });
  afterAll(async () => {
    await database?.close();
  });

  it('gives the member role volume create and its own volumes, in place of the dead patterns', async () => {
    const member = await actionsOf(BUILT_IN_ROLE_IDS.member);
    expect(member).toEqual(
      expect.arrayContaining(['compute:sandbox-volumes:create', 'compute:sandbox-volumes:*@own']),
    );
    expect(member.filter((a) => a.startsWith('compute:volumes:'))).toEqual([]);
    expect(member.filter((a) => a === 'compute:sandbox-volumes:*@own')).toHaveLength(1);
    // Nothing else of the member changed: it still cannot manage anyone's volumes.
    expect(member).not.toContain('compute:sandbox-volumes:*');
    expect(member).toContain('compute:reservations:release@own');
  });

  it('keeps what custom roles allowed, and changes no other role', async () => {
    expect(await actionsOf('role_0volumekeeper0000000000001')).toEqual([
      'compute:sandbox-volumes:*',
      'compute:*:read',
    ]);
    expect(await actionsOf('role_0ownvolumes00000000000001')).toEqual(['compute:sandbox-volumes:*@own']);
    expect(await actionsOf('role_0sandboxadmin000000000001')).toEqual([
      'compute:sandboxes:*',
      'compute:sandbox-volumes:*',
    ]);
    expect(await actionsOf('role_0sandboxowner000000000001')).toEqual([
      'compute:sandboxes:*@own',
      'compute:sandbox-volumes:*@own',
    ]);
    expect(await actionsOf('role_0reader00000000000000001')).toEqual(['compute:*:read']);
    expect(await actionsOf(BUILT_IN_ROLE_IDS.viewer)).not.toContain('compute:sandbox-volumes:*');
    expect(await actionsOf(BUILT_IN_ROLE_IDS.operator)).not.toContain('compute:sandbox-volumes:*');
  });

  it('keeps holding back the volume calls a delegation held', async () => {
    const { rows } = await sql<{
      id: string;
      confirm: string[];
    }>`select id, confirm from iam.delegations where tenant_id = 'acme' order by id`.execute(database.db);
    expect(rows).toEqual([
      { id: 'dlg_0one000000000000000000001', confirm: ['compute:sandbox-volumes:*'] },
      { id: 'dlg_0two000000000000000000001', confirm: ['compute:sandboxes:*', 'compute:sandbox-volumes:*'] },
    ]);
  });
});
