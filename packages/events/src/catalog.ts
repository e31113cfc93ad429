/**
 * Every event type the control plane emits, once, with its subject kind and payload schema: `emit` is
 * typed by it (a wrong type or payload does not compile); `eventTypeList` is what a listing prints.
 */
import {
  auditCheckpointSchema,
  bindingSchema,
  endReason,
  instanceState,
  nodeState,
  reservationState,
  taintSchema,
} from '@better-compute/core/methods';
import { z } from 'zod';
import { confirmationEventTypes } from './confirmation-events.js';
import { fleetEventTypes } from './fleet-events.js';
import { releaseEvents } from './release-events.js';
import { sandboxVolumeEventTypes } from './sandbox-volume-events.js';
import { profileEventTypes } from './profile-events.js';
import { providerAccountEventTypes } from './provider-account-events.js';
import { metalEventTypes } from './metal-events.js';
import { secretEventTypes } from './secret-events.js';
import type { EventTypeSpec, SubjectKind } from './subjects.js';

export type { EventTypeSpec, SubjectKind };

const none = z.object({}).strict();
const version = z.number().int();

/** A node's state changed (cordon, drain, offline, back online, retire, …). */
const nodeStateChange = z.object({
  state: nodeState,
  previousState: nodeState,
  poolId: z.string(),
  version,
  reason: z.string().optional(),
});

/** A reservation ended, for whichever reason. */
const reservationEnd = z.object({
  state: z.literal('ended'),
  endReason,
  previousState: reservationState,
  poolId: z.string(),
  version,
});

const nodeOnReservation = z.object({ nodeId: z.string() });

/** A command's or workflow's node; a workflow's step (its index, and its name where it has one). */
const onNode = z.object({ nodeId: z.string() });
const atStep = onNode.extend({ step: z.number().int() });
const workflowStep = atStep.extend({ name: z.string() });

/** A destructive batch's leaves and approvals needed; at its end, the held commands it cancelled. */
const count = z.number().int();
const batchCounts = z.object({ size: count, approvalsNeeded: count });
const batchEnd = batchCounts.extend({ cancelledCommands: count });

/** An instance moved from one state to another; `reason` says why it failed. */
const instanceChange = z.object({
  state: instanceState,
  previousState: instanceState.nullable(),
  poolId: z.string(),
  nodeId: z.string(),
  version,
  workflowId: z.string().nullable(),
  reason: z.string().optional(),
});
const flavorChange = z.object({ poolId: z.string(), name: z.string(), version });
/** A sandbox moved: its state then and now, where it runs, and why when it failed or ended. */
const sandboxChange = z.object({
  state: z.string(),
  previousState: z.string().nullable(),
  templateId: z.string(),
  nodeId: z.string().nullable(),
  ownerId: z.string().nullable(),
  version,
  reason: z.string().optional(),
});
const sandboxTemplateChange = z.object({ name: z.string(), poolId: z.string(), version });
const sandboxSnapshotChange = z.object({
  state: z.string(),
  sandboxId: z.string(),
  nodeId: z.string(),
  memory: z.boolean(),
  keep: z.boolean(),
  reason: z.string().optional(),
});

export const eventTypes = {
  'site.created': { subject: 'site', data: z.object({ name: z.string() }), summary: 'A site was created' },
  'site.updated': { subject: 'site', data: z.object({ version }), summary: 'A site was updated' },
  'site.deleted': { subject: 'site', data: none, summary: 'A site was deleted' },
  'project.created': {
    subject: 'project',
    data: z.object({ name: z.string() }),
    summary: 'A project was created',
  },
  'project.archived': { subject: 'project', data: none, summary: 'A project was archived' },
  'pool.created': {
    subject: 'pool',
    data: z.object({ name: z.string(), class: z.string(), siteId: z.string() }),
    summary: 'A pool was created',
  },
  'pool.updated': { subject: 'pool', data: z.object({ version }), summary: 'A pool was updated' },
  'pool.archived': { subject: 'pool', data: none, summary: 'A pool was archived' },
  'pool.offered': {
    subject: 'pool',
    // pending: a tenant's offer, waiting until the offered tenant accepts it (the platform's stand at once).
    data: z.object({ tenantId: z.string(), pending: z.literal(true).optional() }),
    summary: 'A pool was offered to a tenant',
  },
  'pool.offer-accepted': {
    subject: 'pool',
    data: z.object({ tenantId: z.string() }),
    summary: 'A tenant accepted a pool’s offer (in the owner’s events and its own)',
  },
  'pool.offer-declined': {
    subject: 'pool',
    data: z.object({ tenantId: z.string() }),
    summary: 'A tenant declined a pool’s offer (in the owner’s events and its own)',
  },
  'pool.unoffered': {
    subject: 'pool',
    data: z.object({ tenantId: z.string() }),
    summary: 'A pool is no longer offered to a tenant',
  },
  'quota.set': {
    subject: 'pool',
    data: z.object({
      tenantId: z.string(),
      resource: z.enum(['gpus', 'reservations', 'instances', 'vcpus', 'memoryMiB']),
      limit: z.number().int().nullable(),
    }),
    summary: 'A tenant’s quota on a pool was set or cleared',
  },
  'joinToken.created': {
    subject: 'joinToken',
    data: z.object({ poolId: z.string(), uses: z.number().int(), preApproved: z.boolean() }),
    summary: 'A join token was created',
  },
  'joinToken.revoked': {
    subject: 'joinToken',
    data: z.object({ poolId: z.string(), reason: z.string() }),
    summary: 'A join token was revoked',
  },
  'siteToken.created': {
    subject: 'siteToken',
    data: z.object({
      poolId: z.string(),
      siteId: z.string(),
      uses: z.number().int(),
      preApproved: z.boolean(),
    }),
    summary: 'A site token was created (the machine joining with it becomes its site’s agent)',
  },
  'siteToken.revoked': {
    subject: 'siteToken',
    data: z.object({ poolId: z.string(), reason: z.string() }),
    summary: 'A site token was revoked',
  },
  'joinRequest.created': {
    subject: 'joinRequest',
    data: z.object({ poolId: z.string(), hostname: z.string() }),
    summary: 'A node asked to join',
  },
  'joinRequest.approved': {
    subject: 'joinRequest',
    data: z.object({ nodeId: z.string(), preApproved: z.literal(true).optional() }),
    summary: 'A join request was approved',
  },
  'joinRequest.rejected': {
    subject: 'joinRequest',
    data: z.object({ reason: z.string().nullable() }),
    summary: 'A join request was rejected',
  },
  'node.joining': {
    subject: 'node',
    data: z.union([
      z.object({ state: z.literal('joining'), poolId: z.string(), name: z.string(), version }),
      nodeStateChange,
    ]),
    summary: 'A node joined its pool and waits for its first heartbeat',
  },
  'node.ready': { subject: 'node', data: nodeStateChange, summary: 'A node takes work' },
  'node.cordoned': { subject: 'node', data: nodeStateChange, summary: 'A node was cordoned' },
  'node.uncordoned': { subject: 'node', data: nodeStateChange, summary: 'A node was uncordoned' },
  'node.draining': { subject: 'node', data: nodeStateChange, summary: 'A node is draining' },
  'node.drained': { subject: 'node', data: nodeStateChange, summary: 'A draining node holds no reservation' },
  'node.offline': { subject: 'node', data: nodeStateChange, summary: 'A node stopped sending heartbeats' },
  'node.online': { subject: 'node', data: nodeStateChange, summary: 'An offline node sent a heartbeat' },
  'node.retired': { subject: 'node', data: nodeStateChange, summary: 'A node was retired' },
  'node.deleted': {
    subject: 'node',
    data: z.object({ poolId: z.string(), previousState: nodeState }),
    summary: 'A node was deleted',
  },
  'node.labeled': {
    subject: 'node',
    data: z.object({ labels: z.record(z.string(), z.string()), version }),
    summary: 'A node’s labels changed',
  },
  'node.tainted': {
    subject: 'node',
    data: z.object({ taints: z.array(taintSchema), version, reason: z.string().optional() }),
    summary: 'A node’s taints changed',
  },
  'node.inventory.changed': {
    subject: 'node',
    data: z.object({ revision: z.number().int() }),
    summary: 'A node reported a new inventory',
  },
  'node.inventory.applied': {
    subject: 'node',
    data: z.object({ revision: z.number().int(), gpus: z.number().int(), version }),
    summary: 'A node’s reported inventory took effect',
  },
  'reservation.created': {
    subject: 'reservation',
    data: z.object({
      state: reservationState,
      poolId: z.string(),
      gpus: z.number().int(),
      durationSeconds: z.number().int(),
      nvlink: z.boolean(),
      version,
    }),
    summary: 'A reservation was made',
  },
  'reservation.queued': {
    subject: 'reservation',
    data: z.object({ state: z.literal('queued'), poolId: z.string(), gpus: z.number().int() }),
    summary: 'A reservation waits in its pool’s queue',
  },
  'reservation.activated': {
    subject: 'reservation',
    data: z.object({
      state: z.literal('active'),
      poolId: z.string(),
      gpus: z.number().int(),
      /** Null for the hold of an instance's GPUs, which lasts until the instance is deleted. */
      endsAt: z.string().nullable(),
      binding: z.array(bindingSchema.omit({ nodeState: true })),
      version,
    }),
    summary: 'A reservation holds its GPUs',
  },
  'reservation.extended': {
    subject: 'reservation',
    data: z.object({
      state: reservationState,
      bySeconds: z.number().int(),
      durationSeconds: z.number().int(),
      endsAt: z.string().nullable(),
      version,
    }),
    summary: 'A reservation was extended',
  },
  'reservation.released': {
    subject: 'reservation',
    data: reservationEnd,
    summary: 'A reservation was released',
  },
  'reservation.expired': {
    subject: 'reservation',
    data: reservationEnd,
    summary: 'A reservation reached its end',
  },
  'reservation.cancelled': {
    subject: 'reservation',
    data: reservationEnd,
    summary: 'A queued reservation was cancelled',
  },
  'reservation.ended': {
    subject: 'reservation',
    data: reservationEnd,
    summary: 'A reservation ended with its node’s retirement',
  },
  'reservation.degraded': {
    subject: 'reservation',
    data: nodeOnReservation.extend({ reason: z.literal('node-offline') }),
    summary: 'A node holding a reservation’s GPUs went offline',
  },
  'reservation.recovered': {
    subject: 'reservation',
    data: nodeOnReservation,
    summary: 'The offline node of a reservation came back',
  },
  'webhook.created': {
    subject: 'webhook',
    data: z.object({ url: z.string(), events: z.array(z.string()), enabled: z.boolean() }),
    summary: 'A webhook was created',
  },
  'webhook.updated': {
    subject: 'webhook',
    data: z.object({ version, changed: z.array(z.string()) }),
    summary: 'A webhook’s URL, event types, description or state changed',
  },
  'webhook.deleted': { subject: 'webhook', data: none, summary: 'A webhook was deleted' },
  'webhook.disabled': {
    subject: 'webhook',
    data: z.object({ reason: z.string(), failingSince: z.string() }),
    summary: 'A webhook was disabled because its endpoint failed for too long',
  },
  'webhook.secret_rotated': {
    subject: 'webhook',
    data: z.object({ version, previousSecretExpiresAt: z.string() }),
    summary: 'A webhook’s signing secret was rotated (the old one signs too until the time given)',
  },
  'webhook.ping': {
    subject: 'webhook',
    data: z.object({ webhookId: z.string(), deliveryId: z.string() }),
    summary: 'A test delivery, sent by webhooks ping (delivered to that webhook only)',
  },
  'ssh_cert.issued': {
    subject: 'sshCert',
    data: z.object({
      nodeId: z.string(),
      holder: z.string(),
      account: z.string(),
      fingerprint: z.string(),
      validBefore: z.string(),
    }),
    summary: 'A break-glass SSH certificate was issued for a node',
  },
  'ssh_cert.revoked': {
    subject: 'sshCert',
    data: z.object({ nodeId: z.string(), holder: z.string(), reason: z.string().nullable() }),
    summary: 'A break-glass SSH certificate was revoked',
  },
  'tunnel.opened': {
    subject: 'tunnel',
    data: z.object({
      nodeId: z.string(),
      instanceId: z.string().nullable(),
      /** For `sandbox exec`: the sandbox whose SSH server the tunnel reaches. */
      sandboxId: z.string().nullable().optional(),
      op: z.string(),
      port: z.number().int().nullable(),
      principal: z.string(),
    }),
    summary: 'A console, exec, port or sandbox SSH tunnel ticket was issued',
  },
  'command.queued': {
    subject: 'command',
    data: z.object({ nodeId: z.string(), kind: z.string() }),
    summary: 'A command was queued for a node’s daemon',
  },
  'command.cancel_requested': {
    subject: 'command',
    data: onNode,
    summary: 'A running command was told to stop',
  },
  'command.cancelled': { subject: 'command', data: onNode, summary: 'A command was cancelled before it ran' },
  'batch.created': {
    subject: 'batch',
    data: batchCounts.extend({ kinds: z.array(z.object({ kind: z.string(), count })), notAfter: z.string() }),
    summary: 'A batch of destructive commands was created, held until approvers sign it',
  },
  'batch.approval_added': {
    subject: 'batch',
    data: z.object({ kid: z.string(), approvals: count, approvalsNeeded: count }),
    summary: 'An approver’s signature over a pending batch was accepted',
  },
  'batch.approved': {
    subject: 'batch',
    data: batchCounts.extend({ approvedBy: z.array(z.string()), released: count, carriedOut: count }),
    summary: 'A threshold of approvers signed a batch: its commands are released',
  },
  'batch.cancelled': { subject: 'batch', data: batchEnd, summary: 'A pending batch was cancelled' },
  'batch.expired': { subject: 'batch', data: batchEnd, summary: 'A batch expired before it was approved' },
  ...confirmationEventTypes,
  ...fleetEventTypes,
  ...secretEventTypes,
  ...profileEventTypes,
  ...providerAccountEventTypes,
  ...metalEventTypes,
  'workflow.started': {
    subject: 'workflow',
    data: z.object({ nodeId: z.string(), kind: z.string() }),
    summary: 'A node workflow started',
  },
  'workflow.step_started': { subject: 'workflow', data: workflowStep, summary: 'A workflow step started' },
  'workflow.step_succeeded': {
    subject: 'workflow',
    data: workflowStep,
    summary: 'A workflow step succeeded',
  },
  'workflow.step_failed': {
    subject: 'workflow',
    data: workflowStep.extend({ error: z.string() }),
    summary: 'A workflow step failed',
  },
  'workflow.succeeded': { subject: 'workflow', data: onNode, summary: 'A workflow finished every step' },
  'workflow.failed': { subject: 'workflow', data: atStep, summary: 'A workflow failed at a step' },
  'workflow.paused': { subject: 'workflow', data: atStep, summary: 'A workflow was paused' },
  'workflow.resumed': { subject: 'workflow', data: atStep, summary: 'A paused workflow was resumed' },
  'workflow.aborted': { subject: 'workflow', data: atStep, summary: 'A workflow was aborted' },
  'workflow.retried': {
    subject: 'workflow',
    data: atStep,
    summary: 'A failed workflow was retried from its failed step',
  },
  'image.registered': {
    subject: 'image',
    data: z.object({ name: z.string(), channel: z.string(), sha256: z.string(), scope: z.string() }),
    summary: 'An image was registered in the catalog',
  },
  'image.promoted': {
    subject: 'image',
    data: z.object({ channel: z.string(), previousChannel: z.string(), version }),
    summary: 'An image moved to another channel',
  },
  'flavor.created': { subject: 'flavor', data: flavorChange, summary: 'A VPS pool gained a flavor' },
  'flavor.updated': { subject: 'flavor', data: flavorChange, summary: 'A flavor’s shape changed' },
  'flavor.deleted': { subject: 'flavor', data: flavorChange, summary: 'A flavor was deleted' },
  'instance.created': {
    subject: 'instance',
    data: instanceChange.extend({ flavorId: z.string(), imageId: z.string() }),
    summary: 'An instance was placed on a node and starts provisioning',
  },
  'instance.provisioning': {
    subject: 'instance',
    data: instanceChange,
    summary: 'An instance’s node is preparing or booting it',
  },
  'instance.running': { subject: 'instance', data: instanceChange, summary: 'An instance runs' },
  'instance.stopping': { subject: 'instance', data: instanceChange, summary: 'An instance is powering off' },
  'instance.stopped': { subject: 'instance', data: instanceChange, summary: 'An instance is powered off' },
  'instance.resized': {
    subject: 'instance',
    data: instanceChange.extend({ flavorId: z.string(), previousFlavorId: z.string() }),
    summary: 'A stopped instance took another flavor',
  },
  'instance.deleting': {
    subject: 'instance',
    data: instanceChange,
    summary: 'An instance is being stopped and its disk removed',
  },
  'instance.deleted': {
    subject: 'instance',
    data: instanceChange,
    summary: 'An instance is gone: its disk removed, its place (and GPUs) freed',
  },
  'instance.failed': {
    subject: 'instance',
    data: instanceChange,
    summary: 'A step on an instance’s node failed; the reason says which',
  },
  'sandbox-quota.set': {
    subject: 'pool',
    data: z.object({
      tenantId: z.string(),
      resource: z.enum(['sandboxes', 'vcpus', 'memoryMiB']),
      limit: z.number().int().nullable(),
    }),
    summary: 'A tenant’s sandbox quota on a pool was set or cleared',
  },
  'sandbox-template.created': {
    subject: 'sandboxTemplate',
    data: sandboxTemplateChange,
    summary: 'A sandbox template was defined',
  },
  'sandbox-template.updated': {
    subject: 'sandboxTemplate',
    data: sandboxTemplateChange,
    summary: 'A sandbox template changed; its warm sandboxes of the old settings are retired',
  },
  'sandbox-template.deleted': {
    subject: 'sandboxTemplate',
    data: sandboxTemplateChange,
    summary: 'A sandbox template was deleted and its warm pool retired',
  },
  'sandbox.created': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A sandbox was placed on a node and starts (for a person, or for a warm pool)',
  },
  'sandbox.ready': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A sandbox booted and its SSH server holds a certified host key',
  },
  'sandbox.claimed': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A create took a warm sandbox from its template’s pool',
  },
  'sandbox.extended': {
    subject: 'sandbox',
    data: sandboxChange.extend({ expiresAt: z.string(), previousExpiresAt: z.string().nullable() }),
    summary: 'A sandbox’s lifetime was lengthened',
  },
  'sandbox.expired': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A sandbox reached the end of its lifetime and is being deleted',
  },
  'sandbox.deleting': { subject: 'sandbox', data: sandboxChange, summary: 'A sandbox is being removed' },
  'sandbox.deleted': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A sandbox is gone, with its snapshots that were not kept',
  },
  'sandbox.failed': {
    subject: 'sandbox',
    data: sandboxChange,
    summary: 'A step on a sandbox’s node failed; the reason says which',
  },
  'sandbox-snapshot.created': {
    subject: 'sandboxSnapshot',
    data: sandboxSnapshotChange,
    summary: 'A snapshot of a sandbox was started',
  },
  'sandbox-snapshot.ready': {
    subject: 'sandboxSnapshot',
    data: sandboxSnapshotChange,
    summary: 'A sandbox snapshot is in the node’s store',
  },
  'sandbox-snapshot.deleted': {
    subject: 'sandboxSnapshot',
    data: sandboxSnapshotChange,
    summary: 'A sandbox snapshot and its files were removed',
  },
  'sandbox-snapshot.failed': {
    subject: 'sandboxSnapshot',
    data: sandboxSnapshotChange,
    summary: 'A sandbox snapshot could not be taken or removed',
  },
  ...sandboxVolumeEventTypes,
  // Published for parties outside the database to keep (docs/audit.md): as audit.checkpoint answers.
  'audit.checkpoint': {
    subject: 'auditLog',
    data: auditCheckpointSchema.strict(),
    summary: 'The audit log of the tenant was sealed: its new signed checkpoint (size, root hash, note)',
  },
  ...releaseEvents,
} as const satisfies Record<string, EventTypeSpec>;

export type EventType = keyof typeof eventTypes;

/** The payload an emitter passes for an event type. */
export type EventData<T extends EventType> = z.input<(typeof eventTypes)[T]['data']>;

/** An event of one type as its emitter writes it; `data` may be left out when the payload is empty. */
export type EventDraftOf<T extends EventType> = {
  type: T;
  subject: { type: (typeof eventTypes)[T]['subject']; id: string | null };
  /** Defaults to the acting tenant. */
  tenantId?: string;
} & ({} extends EventData<T> ? { data?: EventData<T> } : { data: EventData<T> });

/** Any event of the catalog, as an emitter writes it. */
export type CatalogEventDraft = { [T in EventType]: EventDraftOf<T> }[EventType];

/** Every event type with its subject kind and summary, in catalog order: what a listing prints. */
export const eventTypeList: readonly { type: EventType; subject: SubjectKind; summary: string }[] = (
  Object.keys(eventTypes) as EventType[]
).map((type) => ({ type, subject: eventTypes[type].subject, summary: eventTypes[type].summary }));

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(eventTypes, type);
}
