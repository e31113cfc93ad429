/**
 * The messages a daemon sends on its session, checked before anything reads them: a daemon is
 * authenticated, but its messages are still input.
 */
import { RAMDISK_PURPOSES } from '@better-compute/core';
import {
  COMMAND_OUTPUT_LIMIT,
  inventorySchema,
  metalCleaningSchema,
  metalInventorySchema,
} from '@better-compute/core/methods';
import { z } from 'zod';

const commandId = z.string().regex(/^cmd_[A-Za-z0-9]{1,64}$/);
const hardware = z
  .object({
    disks: z
      .array(
        z
          .object({ name: z.string().max(64), sizeBytes: z.number().int().min(0), rotational: z.boolean() })
          .strict(),
      )
      .max(256),
    nics: z
      .array(
        z
          .object({
            name: z.string().max(64),
            mac: z.string().max(64).nullable(),
            speedMbps: z.number().int().nullable(),
          })
          .strict(),
      )
      .max(256),
  })
  .strict();
const capability = z.string().regex(/^[a-z][a-z0-9.-]{0,63}$/);
const streamId = z.number().int().min(1).max(0xffffffff);

const daemonMessage = z.discriminatedUnion('t', [
  z
    .object({
      t: z.literal('hello'),
      version: z.string().regex(/^[0-9A-Za-z.+-]{1,64}$/),
      capabilities: z.array(capability).max(64),
      inventory: inventorySchema,
      hardware: hardware.optional(),
    })
    .strict(),
  z
    .object({
      t: z.literal('heartbeat'),
      inventory: inventorySchema.optional(),
      hardware: hardware.optional(),
    })
    .strict(),
  z.object({ t: z.literal('command.started'), id: commandId }).strict(),
  z
    .object({
      t: z.literal('command.result'),
      id: commandId,
      state: z.enum(['succeeded', 'failed', 'cancelled']),
      exitCode: z.number().int().min(-1).max(255).nullable(),
      stdout: z.string().max(COMMAND_OUTPUT_LIMIT * 2),
      stderr: z.string().max(COMMAND_OUTPUT_LIMIT * 2),
      result: z.record(z.string(), z.unknown()).nullable(),
      error: z.string().max(4000).nullable(),
    })
    .strict(),
  z.object({ t: z.literal('stream.opened'), sid: streamId }).strict(),
  z
    .object({
      t: z.literal('stream.ack'),
      sid: streamId,
      bytes: z
        .number()
        .int()
        .min(1)
        .max(1 << 30),
    })
    .strict(),
  z
    .object({
      t: z.literal('stream.end'),
      sid: streamId,
      exitStatus: z.number().int().min(0).max(255).nullable(),
      error: z
        .object({ code: z.string().regex(/^[A-Z_]{1,64}$/), message: z.string().max(1000) })
        .strict()
        .optional(),
    })
    .strict(),
  z
    .object({
      t: z.literal('instance.exited'),
      /** A VM on this node that stopped without a command asking (the guest powered off, QEMU died). */
      instanceId: z.string().regex(/^inst_[A-Za-z0-9]{1,64}$/),
      reason: z.string().min(1).max(500),
      clean: z.boolean(),
    })
    .strict(),
  z
    .object({
      /** A piece of a stored release build, for the daemon's self-update (docs/rollouts.md). */
      t: z.literal('release.fetch'),
      id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
      version: z.string().regex(/^[0-9A-Za-z.+-]{1,64}$/),
      platform: z
        .string()
        .regex(/^[a-z0-9]+(-[a-z0-9_]+)+$/)
        .max(32),
      offset: z
        .number()
        .int()
        .min(0)
        .max(2 ** 40),
    })
    .strict(),
  z
    .object({
      t: z.literal('certificate.request'),
      /** The node's new public key (SPKI PEM) and its signature over the node id, proving it holds the key. */
      publicKey: z.string().max(4000),
      proof: z.string().max(400),
    })
    .strict(),
  z
    .object({
      /**
       * A site agent's provisioning network saw a PXE request from a MAC with no boot entry. The
       * gateway records it for the agent's own site (never a site the message names) and only
       * from a site agent; it is unauthenticated DHCP data and binds nothing (docs/metal.md).
       */
      t: z.literal('pxe.discovered'),
      mac: z.string().max(32),
      /** DHCP option 97's SMBIOS UUID, when the machine sent one. */
      uuid: z
        .string()
        .regex(/^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/)
        .optional(),
    })
    .strict(),
  z
    .object({
      /**
       * The deploy ramdisk booted on a site's provisioning network reported what it was booted for
       * (inspect: the machine's hardware in `inventory`; clean: what it erased in `cleaning`). The
       * site agent took it with the one-time token it put on that MAC's kernel command line; the
       * gateway records it for a machine of the agent's own site only (modules/metal/ramdisk.ts).
       */
      t: z.literal('metal.report'),
      mac: z.string().max(32),
      purpose: z.enum(RAMDISK_PURPOSES),
      inventory: metalInventorySchema.optional(),
      cleaning: metalCleaningSchema.optional(),
    })
    .strict(),
]);

export type DaemonMessage = z.infer<typeof daemonMessage>;

export function parseDaemonMessage(text: string): DaemonMessage | null {
  try {
    const parsed = daemonMessage.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
