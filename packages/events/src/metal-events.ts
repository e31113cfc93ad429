/**
 * The events of bare-metal machines (docs/metal.md), spread into the catalog (catalog.ts): a machine
 * enrolled, a provision-state change (each names the verb and the workflow that made it), and a
 * power call's answer. They carry the BMC's driver and address at most, never its user's password.
 */
import { metalState } from '@better-compute/core/methods';
import { z } from 'zod';

export const metalEventTypes = {
  'metal.enrolled': {
    subject: 'machine' as const,
    data: z
      .object({
        siteId: z.string(),
        name: z.string(),
        bmcDriver: z.enum(['ipmi', 'redfish']),
        bmcAddress: z.string(),
        provisionState: metalState,
      })
      .strict(),
    summary: 'A bare-metal machine was enrolled by its BMC',
  },
  'metal.state-changed': {
    subject: 'machine' as const,
    data: z
      .object({
        verb: z.string(),
        from: metalState,
        to: metalState,
        workflowId: z.string().nullable(),
        error: z.string().optional(),
        reason: z.string().optional(),
      })
      .strict(),
    summary: 'A bare-metal machine’s provision state changed',
  },
  'metal.powered': {
    subject: 'machine' as const,
    data: z
      .object({
        action: z.enum(['on', 'off', 'reset', 'status']),
        powerState: z.enum(['on', 'off', 'unknown']),
        /** The metal.power workflow of a direct call; null for a batch's member (batchId names it). */
        workflowId: z.string().nullable(),
        batchId: z.string().optional(),
        commandId: z.string().optional(),
        error: z.string().optional(),
      })
      .strict(),
    summary: 'A power call to a bare-metal machine’s BMC was answered (or failed)',
  },
  'metal.inspected': {
    subject: 'machine' as const,
    data: z
      .object({
        workflowId: z.string(),
        mac: z.string(),
        cpus: z.number().int(),
        memoryMiB: z.number().int(),
        disks: z.number().int(),
        nics: z.number().int(),
      })
      .strict(),
    summary: 'The deploy ramdisk reported a bare-metal machine’s hardware (metal inspect)',
  },
  'metal.cleaned': {
    subject: 'machine' as const,
    data: z
      .object({
        workflowId: z.string(),
        mac: z.string(),
        disks: z.number().int(),
        erasedBytes: z.number().int(),
        failed: z.string().optional(),
      })
      .strict(),
    summary:
      'The deploy ramdisk erased a bare-metal machine’s disk metadata, or said why it could not (provide)',
  },
  'node.pxe-mac.confirmed': {
    subject: 'machine' as const,
    data: z.object({ siteId: z.string(), mac: z.string(), productUuid: z.string() }).strict(),
    summary: 'A person bound a MAC as a bare-metal machine’s PXE MAC (metal confirm-mac); it boots from it',
  },
} as const;
