/**
 * The destructive command kinds a batch scope may hold, and each one's payload: the message a leaf
 * encodes, so an approval binds that exact operation. One table, in core, because the server that
 * builds a batch, the CLI that reviews it and the daemon that checks a leaf must encode alike; a
 * kind a module declares destructive is added here. Pure: the console may import it.
 */
import { type IdKind, isId } from '../ids.js';
import { isWellFormedText } from './bytes.js';

export interface PayloadField {
  name: string;
  /** `text`: any well-formed string up to `max`; `choice`: one of `choices`. */
  type: 'text' | 'choice';
  choices?: readonly string[];
  max?: number;
  /** Absent is a value of its own ("the default"), never a wildcard. */
  optional?: boolean;
  /** A `text` field that must be an id of this kind (a node that runs the command, say). */
  id?: IdKind;
}

export interface DestructiveKind {
  kind: string;
  /** The id kind of the leaf's subject. */
  subject: IdKind;
  /** What the command does, as the review summary says it. */
  summary: string;
  /** The payload's fields, in the order the leaf encodes them. */
  fields: readonly PayloadField[];
  /**
   * Whether a leaf must bind its payload: an unbound leaf of this kind is refused, since without
   * its payload the leaf no longer says which node runs it or what it acts on.
   */
  bound?: boolean;
}

/** BMC power of a bare-metal machine, run by its site agent as a held metal.bmc command. */
export const BMC_POWER_KIND = 'metal.bmc-power';

/**
 * The BMC a metal.bmc payload's `bmc` addresses, as a metal.bmc-power leaf binds it: driver,
 * address, port and (Redfish) the pinned certificate fingerprint, the parts that decide which
 * machine the agent reaches. Never the user or password. '' for a `bmc` that is not an object.
 */
export function bmcEndpoint(bmc: unknown): string {
  if (typeof bmc !== 'object' || bmc === null) return '';
  const { driver, address, port, tlsFingerprint } = bmc as Record<string, unknown>;
  if (typeof driver !== 'string' || typeof address !== 'string') return '';
  return `${driver}://${address}${typeof port === 'number' ? `:${port}` : ''}${typeof tlsFingerprint === 'string' ? `#sha256=${tlsFingerprint}` : ''}`;
}

const IMAGE: PayloadField = { name: 'image', type: 'text', max: 256 };

export const DESTRUCTIVE_KINDS: readonly DestructiveKind[] = [
  {
    kind: 'metal.power',
    subject: 'node',
    summary: 'power off, reset or cycle the machine',
    fields: [{ name: 'action', type: 'choice', choices: ['off', 'reset', 'cycle'] }],
  },
  {
    kind: 'metal.deploy',
    subject: 'node',
    summary: 'install an image on the machine, wiping its disks',
    fields: [IMAGE, { name: 'profile', type: 'text', max: 128, optional: true }],
  },
  {
    // The machine is the subject, but its site agent runs the command (a metal.bmc to the machine's
    // BMC); the leaf binds both, and the BMC the agent is to address, so an approval for one machine
    // cannot be spent on another's BMC or by another agent. docs/decisions/metal-power-quorum.md.
    kind: BMC_POWER_KIND,
    subject: 'node',
    summary: 'power off or reset the machine through its BMC, from the named site agent',
    fields: [
      { name: 'action', type: 'choice', choices: ['off', 'reset'] },
      { name: 'runner', type: 'text', max: 64, id: 'node' },
      { name: 'bmc', type: 'text', max: 256 },
    ],
    bound: true,
  },
  {
    kind: 'metal.undeploy',
    subject: 'node',
    summary: 'wipe the machine and return it to the pool',
    fields: [],
  },
  { kind: 'node.delete', subject: 'node', summary: 'remove the node from the fleet', fields: [] },
  { kind: 'node.reimage', subject: 'node', summary: 'reinstall the node from an image', fields: [IMAGE] },
];

const BY_KIND = new Map(DESTRUCTIVE_KINDS.map((entry) => [entry.kind, entry]));

export function destructiveKind(kind: unknown): DestructiveKind | undefined {
  return typeof kind === 'string' ? BY_KIND.get(kind) : undefined;
}

export function isDestructiveKind(kind: unknown): boolean {
  return destructiveKind(kind) !== undefined;
}

/** A payload of a kind: its fields' values (an optional one may be absent). */
export type LeafPayload = Record<string, string>;

/**
 * One command of a batch: who it acts on, what kind it is, and its payload; `payload: null` admits
 * any payload of its kind (an "unbound" leaf, which approvers must accept explicitly).
 */
export interface ScopeLeaf {
  subject: string;
  kind: string;
  payload: LeafPayload | null;
}

/** Why `payload` is not a payload of `entry`, or null when it is. */
function payloadProblem(entry: DestructiveKind, payload: unknown): string | null {
  if (payload === null)
    return entry.bound ? `a ${entry.kind} leaf must bind its payload; null is refused for this kind` : null;
  if (typeof payload !== 'object' || Array.isArray(payload)) return 'the payload is not an object';
  const known = new Set(entry.fields.map((field) => field.name));
  const extra = Object.keys(payload).find((key) => !known.has(key));
  if (extra !== undefined) return `${entry.kind} has no payload field "${extra.slice(0, 40)}"`;
  for (const field of entry.fields) {
    const value = (payload as Record<string, unknown>)[field.name];
    if (value === undefined) {
      if (field.optional) continue;
      return `${entry.kind} needs the payload field "${field.name}"`;
    }
    if (
      field.type === 'choice'
        ? !field.choices!.includes(value as string)
        : !isWellFormedText(value, field.max ?? 256)
    )
      return field.type === 'choice'
        ? `"${field.name}" of ${entry.kind} must be one of ${field.choices!.join(', ')}`
        : `"${field.name}" of ${entry.kind} must be text of 1 to ${field.max ?? 256} characters, without control characters`;
    if (field.id !== undefined && !isId(field.id, value))
      return `"${field.name}" of ${entry.kind} must be a ${field.id} id`;
  }
  return null;
}

/** Why `value` is not a scope leaf, or null when it is one (the leaf, with its payload copied). */
export function leafProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'a leaf is not an object';
  const { subject, kind, payload, ...rest } = value as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) return `a leaf has no field "${extra.slice(0, 40)}"`;
  const entry = destructiveKind(kind);
  if (!entry) return `"${String(kind).slice(0, 60)}" is not a destructive command kind`;
  if (!isId(entry.subject, subject))
    return `the subject of a ${entry.kind} leaf must be a ${entry.subject} id`;
  if (payload === undefined) return 'a leaf needs a payload (null admits any payload of its kind)';
  return payloadProblem(entry, payload);
}

/** Whether the leaf admits any payload of its kind. */
export const isUnbound = (leaf: ScopeLeaf): boolean => leaf.payload === null;
