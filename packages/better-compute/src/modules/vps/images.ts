/**
 * The image catalog: a tenant's own images and the platform's (the root tenant's), which every
 * tenant sees. An image's files are fixed when it is registered (nodes cache them by digest and
 * refuse a file whose digest differs); only its channel moves.
 */
import {
  ADDRESS_KIND_WORDS,
  classifyHost,
  ComputeError,
  hostInWords,
  newId,
  ROOT_TENANT,
} from '@better-compute/core';
import type { ImageFile, RuntimeImage } from '@better-compute/core/runtime-commands';
import type { CallContext } from '../define-module.js';
import { checkVersion, iso } from '../fleet/common.js';
import { type FlavorRow, type ImageRow, type StoredBoot, vpsDb, type VpsDb } from './tables.js';

function imageView(row: ImageRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    scope: row.tenant_id === ROOT_TENANT ? ('platform' as const) : ('tenant' as const),
    name: row.name,
    channel: row.channel,
    diskFormat: row.disk_format,
    source: row.source,
    sha256: row.sha256,
    sizeBytes: Number(row.size_bytes),
    architecture: row.architecture,
    os: row.os,
    boot: row.boot,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** The image as a node needs it, for the runtime commands. */
export function runtimeImage(row: ImageRow): RuntimeImage {
  // A tenant's sources were checked as public when registered; the node checks every address its
  // download reaches again, since a name may resolve, or a server redirect, elsewhere later.
  if (row.tenant_id === ROOT_TENANT)
    return {
      imageId: row.id,
      diskFormat: row.disk_format,
      disk: { source: row.source, sha256: row.sha256, sizeBytes: Number(row.size_bytes) },
      boot: row.boot,
    };
  const tenantFile = (file: ImageFile): ImageFile => ({ ...file, publicOnly: true });
  return {
    imageId: row.id,
    diskFormat: row.disk_format,
    disk: tenantFile({ source: row.source, sha256: row.sha256, sizeBytes: Number(row.size_bytes) }),
    boot: row.boot
      ? {
          ...row.boot,
          kernel: tenantFile(row.boot.kernel),
          initrd: row.boot.initrd ? tenantFile(row.boot.initrd) : null,
        }
      : null,
  };
}

function imageNotFound(id: string) {
  return new ComputeError('NOT_FOUND', `image ${id} does not exist`, {
    details: { id },
    hint: 'better-compute images list shows the images your tenant can boot.',
  });
}

/** An image the tenant can boot: its own or the platform's; NOT_FOUND otherwise. */
export async function visibleImage(db: VpsDb, tenantId: string, imageId: string): Promise<ImageRow> {
  const row = await db
    .selectFrom('compute.images')
    .selectAll()
    .where('id', '=', imageId)
    .where('tenant_id', 'in', [tenantId, ROOT_TENANT])
    .executeTakeFirst();
  if (!row) throw imageNotFound(imageId);
  return row;
}

/**
 * The image a create boots: the one it names, or else the newest image of its flavor's OS on the
 * flavor's channel (the tenant's own and the platform's), found now, so a promotion moves the
 * flavor's next instances on.
 */
export async function imageToBoot(
  db: VpsDb,
  tenantId: string,
  imageId: string | undefined,
  flavor: FlavorRow,
): Promise<ImageRow> {
  if (imageId) return visibleImage(db, tenantId, imageId);
  if (!flavor.image_os || !flavor.image_channel)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `flavor ${flavor.name} follows no image channel, so the create must name its image`,
      {
        details: { field: 'imageId', flavorId: flavor.id },
        hint: `Pass --image img_… (better-compute images list), or have the pool's owner give the flavor one: better-compute flavors update ${flavor.id} --image-os debian-12 --image-channel stable.`,
      },
    );
  const newest = await db
    .selectFrom('compute.images')
    .selectAll()
    .where('tenant_id', 'in', [tenantId, ROOT_TENANT])
    .where('os', '=', flavor.image_os)
    .where('channel', '=', flavor.image_channel)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!newest)
    throw new ComputeError(
      'INVALID_STATE',
      `flavor ${flavor.name} follows ${flavor.image_os} on ${flavor.image_channel}, and no such image is registered`,
      {
        details: { os: flavor.image_os, channel: flavor.image_channel },
        hint: `Register one (better-compute images register … --channel ${flavor.image_channel}) or promote one (images promote).`,
      },
    );
  return newest;
}

export async function listImages(
  ctx: CallContext<{
    channel?: ImageRow['channel'] | undefined;
    name?: string | undefined;
    limit: number;
    cursor?: string | undefined;
  }>,
) {
  let query = vpsDb(ctx.db)
    .selectFrom('compute.images')
    .selectAll()
    .where('tenant_id', 'in', [ctx.tenantId, ROOT_TENANT]);
  if (ctx.input.channel) query = query.where('channel', '=', ctx.input.channel);
  if (ctx.input.name) query = query.where('name', '=', ctx.input.name);
  if (ctx.input.cursor) query = query.where('id', '>', ctx.input.cursor);
  const rows = await query
    .orderBy('id')
    .limit(ctx.input.limit + 1)
    .execute();
  const page = rows.slice(0, ctx.input.limit);
  return {
    items: page.map(imageView),
    nextCursor: rows.length > ctx.input.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export async function getImage(ctx: CallContext<{ imageId: string }>) {
  return imageView(await visibleImage(vpsDb(ctx.db), ctx.tenantId, ctx.input.imageId));
}

/**
 * What a tenant's image may name. A node path names a file of the operator's machine, so only the
 * platform's images (the root tenant's) use them: a tenant's image is fetched from an https URL,
 * and not from a loopback, private, link-local or metadata address named literally (in any
 * spelling) or `localhost` (the node resolves other names itself; its fetch checks the digest, so an
 * internal file's content never reaches a guest unless its digest is already known).
 */
function checkTenantSources(tenantId: string, sources: readonly { field: string; source: string }[]) {
  if (tenantId === ROOT_TENANT) return;
  for (const { field, source } of sources) {
    if (source.startsWith('/'))
      throw new ComputeError(
        'ACCESS_DENIED',
        `${field}: only the platform’s images name files on the nodes`,
        {
          details: { reason: 'node-path', field },
          hint: 'Give an https:// URL the nodes can download the file from.',
        },
      );
    // The same check as a webhook's (classifyHost): any spelling of an internal address, and
    // localhost names with or without trailing dots.
    const host = classifyHost(new URL(source).hostname);
    if (host.kind !== 'public' && host.kind !== 'name')
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `${field}: ${hostInWords(host)} is ${ADDRESS_KIND_WORDS[host.kind]}, not a public address`,
        {
          details: { field },
          hint: 'Serve the image from a public https:// host.',
        },
      );
  }
}

export async function registerImage(
  ctx: CallContext<{
    name: string;
    source: string;
    diskFormat: 'qcow2' | 'raw';
    sha256: string;
    sizeBytes: number;
    architecture: 'x86_64' | 'aarch64';
    os: string;
    channel: ImageRow['channel'];
    boot?: StoredBoot | undefined;
  }>,
) {
  const db = vpsDb(ctx.db);
  const { input } = ctx;
  checkTenantSources(ctx.tenantId, [
    { field: 'source', source: input.source },
    ...(input.boot
      ? [
          { field: 'boot.kernel.source', source: input.boot.kernel.source },
          ...(input.boot.initrd ? [{ field: 'boot.initrd.source', source: input.boot.initrd.source }] : []),
        ]
      : []),
  ]);
  const taken = await db
    .selectFrom('compute.images')
    .select('id')
    .where('tenant_id', '=', ctx.tenantId)
    .where('name', '=', input.name)
    .executeTakeFirst();
  if (taken)
    throw new ComputeError('ALREADY_EXISTS', `your tenant has an image named ${input.name}: ${taken.id}`, {
      details: { field: 'name', id: taken.id },
      hint: 'An image never changes once registered: register the new one under a new name (debian-12-20261204).',
    });
  const now = ctx.now();
  const row = await db
    .insertInto('compute.images')
    .values({
      id: newId('image'),
      tenant_id: ctx.tenantId,
      name: input.name,
      channel: input.channel,
      disk_format: input.diskFormat,
      source: input.source,
      sha256: input.sha256,
      size_bytes: input.sizeBytes,
      architecture: input.architecture,
      os: input.os,
      boot: input.boot ? JSON.stringify(input.boot) : null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row)
    throw new ComputeError('ALREADY_EXISTS', `your tenant has an image named ${input.name}`, {
      details: { field: 'name' },
    });
  const view = imageView(row);
  ctx.emit({
    type: 'image.registered',
    subject: { type: 'image', id: row.id },
    data: { name: row.name, channel: row.channel, sha256: row.sha256, scope: view.scope },
  });
  return view;
}

export async function promoteImage(
  ctx: CallContext<{ imageId: string; channel: ImageRow['channel']; ifVersion?: number | undefined }>,
) {
  const db = vpsDb(ctx.db);
  const visible = await visibleImage(db, ctx.tenantId, ctx.input.imageId);
  if (visible.tenant_id !== ctx.tenantId)
    throw new ComputeError(
      'ACCESS_DENIED',
      `image ${visible.id} is the platform’s; only its operators move it`,
      {
        details: { reason: 'not-owner', imageId: visible.id },
        hint: 'Register an image of your own to manage its channel.',
      },
    );
  const row = await db
    .selectFrom('compute.images')
    .selectAll()
    .where('id', '=', visible.id)
    .forUpdate()
    .executeTakeFirstOrThrow();
  checkVersion('image', row.id, row.version, ctx.input.ifVersion);
  if (row.channel === ctx.input.channel) return imageView(row);
  const now = ctx.now();
  const updated = await db
    .updateTable('compute.images')
    .set({ channel: ctx.input.channel, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.emit({
    type: 'image.promoted',
    subject: { type: 'image', id: row.id },
    data: { channel: updated.channel, previousChannel: row.channel, version: updated.version },
  });
  return imageView(updated);
}
