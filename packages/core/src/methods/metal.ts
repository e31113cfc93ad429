/**
 * The `metal` group: bare-metal machines and their provision states (core's metal-states.ts holds
 * the one table of transitions). A machine's id is a node id (`node_…`): in Ironic's words it is a
 * node, and the node it becomes once deployed keeps that id. Its BMC password is given once, to
 * `enroll`, sealed at rest under the deployment secret and never answered, listed or put in an
 * event; the gateway opens it only into the signed command it sends the site's agent.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { METAL_STATES } from '../metal-states.js';
import { normalizeMac } from '../mac.js';
import { batchSchema, DEFAULT_BATCH_HOURS, MAX_BATCH_HOURS, MAX_CREATE_LEAVES } from './batches.js';
import { idempotencyKey, idOf, isoTime, pageInputById, pageOf, tenantId } from './common.js';
import { resourceName } from './sites.js';

export const metalState = z.enum(METAL_STATES);
const bmcDriver = z.enum(['ipmi', 'redfish']);
/** What `power` may be asked: change it, or read it. */
export const metalPowerAction = z.enum(['on', 'off', 'reset', 'status']);
/**
 * The IAM action of every metal change: the console guide decides bare-metal work (confirm-mac)
 * as compute:nodes:provision on the node, and a machine is a node to be; operators hold it through
 * compute:nodes:*, so no role needed changing. Reads (list, get, discovered) are compute:metal:read.
 */
export const METAL_PROVISION_ACTION = 'compute:nodes:provision';

/** A MAC as a NIC has it; the message names the field and what is wrong (core's mac.ts). */
const macAddress = z
  .string()
  .max(64)
  .refine((value) => normalizeMac(value) !== null, {
    message:
      'must be a MAC address of a network card: six hex pairs separated by : or -, like 52:54:00:12:34:56',
  });

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The hardware the deploy ramdisk found on a machine (metal inspect), as its agent reports it: the
 * SMBIOS system UUID, the processors, the memory the firmware's memory devices hold (physicalMiB)
 * beside what the kernel sees (totalKiB), and the disks and network cards. Every field is bounded,
 * since the report comes from the machine, not from a person.
 */
/** A name the machine reports (a processor's or a disk's model, a serial): printable, no control character. */
const reportedText = (max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, 'must hold no control character');

/** A disk as the kernel names it (sda, nvme0n1, vda), and a count of its bytes. */
const diskName = z.string().regex(/^[a-z0-9]{1,32}$/);
const diskBytes = z
  .number()
  .int()
  .min(0)
  .max(2 ** 62);

export const metalInventorySchema = z
  .object({
    systemUuid: z.string().regex(UUID_PATTERN).nullable(),
    cpu: z.object({ count: z.number().int().min(1).max(8192), model: reportedText(200) }).strict(),
    memory: z
      .object({
        physicalMiB: z
          .number()
          .int()
          .min(0)
          .max(2 ** 40),
        totalKiB: z
          .number()
          .int()
          .min(0)
          .max(2 ** 50),
      })
      .strict(),
    disks: z
      .array(
        z
          .object({
            name: diskName,
            sizeBytes: diskBytes,
            model: reportedText(100),
            serial: reportedText(100),
            rotational: z.boolean(),
          })
          .strict(),
      )
      .max(64),
    nics: z
      .array(
        z
          .object({
            name: z.string().regex(/^[A-Za-z0-9._-]{1,15}$/),
            mac: z.string().regex(/^[0-9a-f:]{0,32}$/),
          })
          .strict(),
      )
      .max(64),
  })
  .strict();
export type MetalInventory = z.infer<typeof metalInventorySchema>;

/**
 * What the deploy ramdisk reports when it cleaned a machine (provide): each writable disk it found
 * and how many bytes of metadata it zeroed there (the partition table at both ends of the disk and
 * the start of each partition, where file systems keep their superblocks), or why it could not.
 */
export const metalCleaningSchema = z
  .object({
    /** The SMBIOS system UUID, checked against the machine's as an inspection's is. */
    systemUuid: z.string().regex(UUID_PATTERN).nullable(),
    disks: z
      .array(
        z
          .object({
            name: diskName,
            sizeBytes: diskBytes,
            partitions: z.number().int().min(0).max(1024),
            erasedBytes: diskBytes,
          })
          .strict(),
      )
      .max(64),
    /** Why cleaning stopped (a write that failed, a disk that read back non-zero); null when it finished. */
    failed: reportedText(300).nullable(),
  })
  .strict();
export type MetalCleaning = z.infer<typeof metalCleaningSchema>;

export const metalMachineSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  siteId: z.string(),
  name: z.string(),
  provisionState: metalState,
  /** The state a running transition's workflow ends in when it succeeds; null when none runs. */
  targetState: metalState.nullable(),
  /** The BMC's answer to the last power call or verification; `unknown` until one. */
  powerState: z.enum(['on', 'off', 'unknown']),
  bmc: z.object({
    driver: bmcDriver,
    address: z.string(),
    port: z.number().int().nullable(),
    username: z.string(),
    /** A Redfish BMC's pinned certificate fingerprint (colon-separated upper-case hex); null for IPMI. */
    tlsFingerprint: z.string().nullable(),
    /** Always true: a machine is enrolled with a password, which no answer ever holds. */
    passwordSet: z.literal(true),
  }),
  productUuid: z.string(),
  macs: z.array(z.string()),
  /** What the last inspection found (metal inspect); null until one reported. */
  inventory: metalInventorySchema.nullable(),
  inspectedAt: isoTime.nullable(),
  /** What the last cleaning (provide) erased, or why it failed; null until one reported. */
  cleaning: metalCleaningSchema.nullable(),
  cleanedAt: isoTime.nullable(),
  /** The workflow of the transition that runs now, or ran last. */
  workflowId: z.string().nullable(),
  lastError: z.string().nullable(),
  /** What the machine allows now (core's allowedVerbs), so no client keeps its own copy of the rule. */
  allowed: z.array(z.string()),
  version: z.number().int(),
  createdAt: isoTime,
  updatedAt: isoTime,
  stateChangedAt: isoTime,
});

const machineRef = { tenantId, machineId: idOf('node').describe('The machine (node_…)') };
const machineResource = (input: { machineId: string }) => ({
  type: 'compute-metal-machine',
  id: input.machineId,
});
const reasonField = z
  .string()
  .max(500)
  .optional()
  .describe('Why, for people and the audit log (up to 500 characters)');

const metalEnroll = method({
  kind: 'mutation',
  summary: 'Enroll a bare-metal machine by its BMC at a site; the BMC password is sealed and never answered',
  tenantScoped: true,
  idempotent: true,
  access: { action: METAL_PROVISION_ACTION },
  secretInput: ['bmcPassword'],
  input: z
    .object({
      tenantId,
      siteId: idOf('site').describe('The site whose agent reaches the BMC'),
      name: resourceName,
      bmcDriver: bmcDriver.describe('How the BMC is spoken to: ipmi (IPMI over LAN) or redfish'),
      bmcAddress: z
        .string()
        .regex(/^[A-Za-z0-9.:-]{1,253}$|^\[[0-9A-Fa-f:.]{2,45}\]$/, 'must be a host name or IP address')
        .refine((value) => !value.startsWith('-'), 'must be a host name or IP address')
        .describe('The BMC’s host name or address (for redfish, its HTTPS host)'),
      bmcPort: z
        .number()
        .int()
        .min(1)
        .max(65535)
        .optional()
        .describe('The BMC’s port (623 for IPMI, 443 for Redfish)'),
      bmcUser: z
        .string()
        .regex(/^[\x21-\x7e]{1,64}$/, 'must be 1 to 64 printable characters without spaces')
        .describe('The BMC account'),
      bmcPassword: z
        .string()
        .min(1, 'must not be empty')
        .max(256, 'must be at most 256 characters')
        .refine((value) => !/[\0\r\n]/.test(value), 'must not hold a NUL or a line break')
        .describe(
          'The BMC account’s password: sealed at rest, never answered (the CLI reads it from --bmc-password-file)',
        ),
      bmcTlsFingerprint: z
        .string()
        .regex(
          /^(sha256[:/])?([0-9A-Fa-f]{2}:?){31}[0-9A-Fa-f]{2}$/i,
          'must be a SHA-256 fingerprint: 64 hex digits, with or without colons',
        )
        .optional()
        .describe('For redfish: the SHA-256 fingerprint of the BMC’s TLS certificate, which the agent pins'),
      productUuid: z
        .string()
        .regex(
          /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/,
          'must be a UUID like 4c4c4544-0042-3510-8052-b4c04f4a4e31',
        )
        .describe('The machine’s SMBIOS product UUID'),
      macs: z
        .array(macAddress)
        .max(16)
        .optional()
        .describe('The machine’s NIC MACs, when known (at most 16)'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict()
    // A Redfish BMC is reached over HTTPS with its certificate pinned; IPMI has no certificate.
    .superRefine((input, ctx) => {
      if (input.bmcDriver === 'redfish' && input.bmcTlsFingerprint === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['bmcTlsFingerprint'],
          message: 'is required for a redfish BMC: the agent pins its TLS certificate',
        });
      if (input.bmcDriver === 'ipmi' && input.bmcTlsFingerprint !== undefined)
        ctx.addIssue({ code: 'custom', path: ['bmcTlsFingerprint'], message: 'is only for a redfish BMC' });
    }),
  output: metalMachineSchema,
});

const metalList = method({
  kind: 'query',
  summary: 'List the tenant’s bare-metal machines',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      siteId: idOf('site').optional().describe('Only this site’s machines'),
      provisionState: metalState.optional().describe('Only machines in this provision state'),
      ...pageInputById('node'),
    })
    .strict(),
  output: pageOf(metalMachineSchema),
});

const metalGet = method({
  kind: 'query',
  summary: 'Show a bare-metal machine and what it allows now',
  tenantScoped: true,
  resource: machineResource,
  input: z.object(machineRef).strict(),
  output: metalMachineSchema,
});

/** A verb of the transition table: one machine, a reason. */
function verb(summary: string) {
  return method({
    kind: 'mutation',
    summary,
    tenantScoped: true,
    access: { action: METAL_PROVISION_ACTION },
    resource: machineResource,
    input: z.object({ ...machineRef, reason: reasonField }).strict(),
    output: metalMachineSchema,
  });
}

const metalPower = method({
  kind: 'mutation',
  summary:
    'Power a machine on, off or reset it through its BMC, or read its power state; off and reset go through the destructive-batch quorum when it is on',
  tenantScoped: true,
  access: { action: METAL_PROVISION_ACTION },
  resource: machineResource,
  input: z
    .object({
      ...machineRef,
      action: metalPowerAction.describe('on, off, reset, or status to read the power state'),
      reason: reasonField,
    })
    .strict(),
  output: metalMachineSchema,
});

/**
 * What `bulk` runs on each machine: a verb of the table, or a power action. power-off and
 * power-reset are the destructive ones: while the quorum is on they become one batch of
 * metal.bmc-power leaves; every other verb, and every verb while it is off, runs at once on each
 * machine as the one-machine method would (docs/decisions/metal-bulk.md).
 */
export const METAL_BULK_VERBS = [
  'manage',
  'inspect',
  'provide',
  'retire',
  'recover',
  'abort',
  'power-on',
  'power-off',
  'power-reset',
  'power-status',
] as const;
export const metalBulkVerb = z.enum(METAL_BULK_VERBS);
/** The verbs a bulk call puts through the destructive-batch quorum when it is on. */
export const METAL_BULK_DESTRUCTIVE = ['power-off', 'power-reset'] as const;
/** The most machines one bulk call names: what one batch holds (MAX_CREATE_LEAVES). */
export const MAX_BULK_MACHINES = MAX_CREATE_LEAVES;

const metalBulk = method({
  kind: 'mutation',
  summary:
    'Run one verb on many machines at once; power-off and power-reset become one batch for the approvers while the destructive-batch quorum is on',
  tenantScoped: true,
  idempotent: true,
  access: { action: METAL_PROVISION_ACTION },
  input: z
    .object({
      tenantId,
      verb: metalBulkVerb.describe(
        'What to run on each machine: manage, provide, retire, recover, abort, or power-on, power-off, power-reset, power-status',
      ),
      machineIds: z
        .array(idOf('node'))
        .min(1, 'must name at least one machine')
        .max(MAX_BULK_MACHINES, `must name at most ${MAX_BULK_MACHINES} machines (one batch)`)
        .describe(`The machines (node_…), 1 to ${MAX_BULK_MACHINES}; a repeated id counts once`),
      reason: z
        .string()
        .min(1)
        .max(500)
        .describe(
          'Why, in one line: what the batch’s approvers read first, and each machine’s workflow and audit entry',
        ),
      hours: z
        .number()
        .int()
        .min(1)
        .max(MAX_BATCH_HOURS)
        .default(DEFAULT_BATCH_HOURS)
        .describe('When it becomes a batch: how long it stays open for approval'),
      idempotencyKey: idempotencyKey.optional(),
    })
    .strict(),
  output: z.object({
    verb: metalBulkVerb,
    /** batch: held for the approvers (the quorum is on and the verb is destructive); direct: started now. */
    mode: z.enum(['batch', 'direct']),
    /** The machines, deduplicated, in the order given. */
    machineIds: z.array(z.string()),
    /** The batch the approvers sign, in batch mode; null in direct mode. */
    batch: batchSchema.nullable(),
    /** Each machine after its verb started, in direct mode; empty in batch mode. */
    machines: z.array(metalMachineSchema),
  }),
});

/** One MAC a site's agent saw PXE-booting without a boot entry, classified for a decision. */
export const pxeDiscoverySchema = z.object({
  mac: z.string(),
  /** The SMBIOS UUID the machine sent in DHCP option 97, lower case; null when it sent none. */
  uuid: z.string().nullable(),
  /**
   * candidate: the UUID is that of a machine of the site enrolled without MACs (confirm-mac binds
   * it); unknown: no machine of the site matches; enrolled: a machine of the site has the MAC.
   */
  kind: z.enum(['candidate', 'unknown', 'enrolled']),
  /** The matching machine of a candidate or enrolled row; null for unknown. */
  machineId: z.string().nullable(),
  machineName: z.string().nullable(),
  firstSeenAt: isoTime,
  lastSeenAt: isoTime,
  timesSeen: z.number().int(),
});

const metalDiscovered = method({
  kind: 'query',
  summary:
    'List what a site’s agents saw PXE-booting from MACs with no boot entry in the last 24 hours: candidates, then unknown, then enrolled, newest first',
  tenantScoped: true,
  input: z
    .object({
      tenantId,
      siteId: idOf('site').describe('The site whose PXE discovery to list'),
    })
    .strict(),
  output: z.object({ siteId: z.string(), items: z.array(pxeDiscoverySchema) }),
});

const metalConfirmMac = method({
  kind: 'mutation',
  summary:
    'Bind a MAC as the PXE MAC of a machine enrolled without MACs; it then boots from it. Discovery never binds one by itself',
  tenantScoped: true,
  access: { action: METAL_PROVISION_ACTION },
  resource: machineResource,
  input: z
    .object({
      ...machineRef,
      mac: macAddress.describe(
        'The PXE MAC to bind, upper or lower case, with : or - (such as a candidate of metal.discovered)',
      ),
    })
    .strict(),
  output: metalMachineSchema,
});

/** The `metal` group: each method's name, route (`/metal/…`) and IAM action come from here. */
export const metalGroup = defineGroup(
  'metal',
  { module: 'metal' },
  {
    enroll: metalEnroll,
    list: metalList,
    get: metalGet,
    manage: verb(
      'Verify the BMC (the site agent asks it for the power state); the machine becomes manageable',
    ),
    inspect: verb(
      'Boot the deploy ramdisk on a manageable machine; it reports the real hardware, and the machine is manageable again with its inventory',
    ),
    provide: verb('Clean a manageable machine and make it available'),
    retire: verb('Retire a machine that holds nothing; it is never provided again'),
    abort: verb(
      'Interrupt the running transition where the table allows it; the machine ends in its failure state',
    ),
    recover: verb(
      'Return a machine from a failure state to the state the table names, once a person has looked',
    ),
    power: metalPower,
    bulk: metalBulk,
    discovered: metalDiscovered,
    confirmMac: metalConfirmMac,
  },
);
