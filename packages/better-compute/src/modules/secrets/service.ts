/**
 * `secrets.*`: put (create, or a new version), delete, list and get. Every answer is the secret's
 * metadata; the value goes in sealed and never comes out here (resolve.ts opens it where a
 * resource uses it). Each mutation is the caller's transaction.
 */
import { ComputeError, newId } from '@better-compute/core';
import { MAX_SECRETS_PER_TENANT } from '@better-compute/core/methods';
import type { CallContext } from '../define-module.js';
import { noDeploymentSecret, type SecretSealer } from './sealing.js';
import { type SecretRow, secretsDb, type SecretsDb } from './tables.js';

const iso = (value: Date | string) => new Date(value).toISOString();

const secretReference = (tenantId: string, id: string) => `secret://${tenantId}/${id}`;

export function secretView(row: SecretRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    version: row.version,
    reference: secretReference(row.tenant_id, row.id),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

interface Named {
  secretId?: string | undefined;
  name?: string | undefined;
}

const label = (input: Named) => input.secretId ?? input.name ?? '?';

function notFound(input: Named): ComputeError {
  return new ComputeError('NOT_FOUND', `secret ${label(input)} does not exist`, {
    details: { id: label(input) },
    hint: 'List the tenant’s secrets with better-compute secrets list.',
  });
}

async function find(db: SecretsDb, tenantId: string, input: Named, forUpdate: boolean) {
  let query = db.selectFrom('compute.secrets').selectAll().where('tenant_id', '=', tenantId);
  query =
    input.secretId !== undefined
      ? query.where('id', '=', input.secretId)
      : query.where('name', '=', input.name!);
  if (forUpdate) query = query.forUpdate();
  return query.executeTakeFirst();
}

function checkVersion(row: SecretRow, ifVersion: number | undefined) {
  if (ifVersion !== undefined && row.version !== ifVersion)
    throw new ComputeError('CONFLICT', `secret ${row.id} is at version ${row.version}, not ${ifVersion}`, {
      details: { version: row.version },
      hint: `Read it again (better-compute secrets get ${row.id}) and decide on its current version.`,
    });
}

export function putSecret(sealer: SecretSealer) {
  return async (
    ctx: CallContext<Named & { value: string; ifVersion?: number | undefined }>,
  ): Promise<ReturnType<typeof secretView>> => {
    if (!sealer.available) throw noDeploymentSecret();
    const db = secretsDb(ctx.db);
    const { input, tenantId } = ctx;
    const now = ctx.now();
    const size = Buffer.byteLength(input.value, 'utf8');
    let row = await find(db, tenantId, input, true);
    let created = false;
    if (!row) {
      if (input.secretId !== undefined) throw notFound(input);
      if (input.ifVersion !== undefined)
        throw new ComputeError('CONFLICT', `secret ${input.name} does not exist, so it is at no version`, {
          details: { version: null },
          hint: 'Leave --if-version out to create it.',
        });
      const { count } = await db
        .selectFrom('compute.secrets')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('tenant_id', '=', tenantId)
        .executeTakeFirstOrThrow();
      if (Number(count) >= MAX_SECRETS_PER_TENANT)
        throw new ComputeError(
          'QUOTA_EXCEEDED',
          `tenant ${tenantId} keeps ${MAX_SECRETS_PER_TENANT} secrets, the most a tenant keeps`,
          {
            details: { limit: MAX_SECRETS_PER_TENANT },
            hint: 'Delete secrets no template uses (better-compute secrets delete NAME).',
          },
        );
      const id = newId('secret');
      // A concurrent put of the same new name inserts nothing here and updates the row below.
      row = await db
        .insertInto('compute.secrets')
        .values({
          id,
          tenant_id: tenantId,
          name: input.name!,
          version: 1,
          sealed: sealer.seal(input.value, { tenantId, id, version: 1 }),
          size_bytes: size,
          created_by: ctx.identity?.principalId ?? null,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
        .returningAll()
        .executeTakeFirst();
      created = row !== undefined;
      row ??= await find(db, tenantId, input, true);
      if (!row) throw notFound(input);
    }
    if (!created) {
      checkVersion(row, input.ifVersion);
      const version = row.version + 1;
      row = await db
        .updateTable('compute.secrets')
        .set({
          version,
          sealed: sealer.seal(input.value, { tenantId, id: row.id, version }),
          size_bytes: size,
          updated_at: now,
        })
        .where('id', '=', row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    ctx.emit({
      type: 'secret.put',
      subject: { type: 'secret', id: row.id },
      data: { name: row.name, version: row.version, created },
    });
    return secretView(row);
  };
}

export async function deleteSecret(ctx: CallContext<Named & { ifVersion?: number | undefined }>) {
  const db = secretsDb(ctx.db);
  const row = await find(db, ctx.tenantId, ctx.input, true);
  if (!row) throw notFound(ctx.input);
  checkVersion(row, ctx.input.ifVersion);
  await db.deleteFrom('compute.secrets').where('id', '=', row.id).execute();
  ctx.emit({
    type: 'secret.deleted',
    subject: { type: 'secret', id: row.id },
    data: { name: row.name, version: row.version },
  });
  return { id: row.id, name: row.name, deleted: true as const };
}

export async function getSecret(ctx: CallContext<Named>) {
  const row = await find(secretsDb(ctx.db), ctx.tenantId, ctx.input, false);
  if (!row) throw notFound(ctx.input);
  return secretView(row);
}

export async function listSecrets(
  ctx: CallContext<{ name?: string | undefined; limit: number; cursor?: string | undefined }>,
) {
  let query = secretsDb(ctx.db)
    .selectFrom('compute.secrets')
    .selectAll()
    .where('tenant_id', '=', ctx.tenantId)
    .orderBy('id')
    .limit(ctx.input.limit + 1);
  if (ctx.input.name !== undefined) query = query.where('name', '=', ctx.input.name);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query.execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(secretView),
    nextCursor: rows.length > ctx.input.limit ? page.at(-1)!.id : null,
  };
}
