/**
 * The `audit` group: what the deployment publishes of each tenant's signed audit log, so that a
 * party outside its database (a monitor, a witness, a customer) can keep checkpoints and check later
 * that the log still extends them (docs/audit.md). Both methods are public: a checkpoint gives away
 * the log's size and root hash only, never an entry, and a consistency proof only hashes of subtrees.
 */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { tenantId } from './common.js';

const base64Hash = z.string().regex(/^[A-Za-z0-9+/]{43}=$/, 'must be a base64 SHA-256 hash');
/** A tree size, as a checkpoint's second line writes it (the database's bigint, a safe integer here). */
const treeSize = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** One checkpoint as it is published: the C2SP signed note, and the verifier key that signed it. */
export const auditCheckpointSchema = z.object({
  tenantId: z.string(),
  /** `<trust domain>/audit/<tenant>`: the log's origin, and the name of the key that signs it. */
  origin: z.string(),
  size: treeSize,
  rootHash: base64Hash,
  /** The signed note (c2sp.org/tlog-checkpoint), byte for byte as it was signed. */
  note: z.string(),
  /** The audit key's verifier key (c2sp.org/signed-note): check its pin before trusting it. */
  signer: z.string(),
});

const auditCheckpoint = method({
  kind: 'query',
  summary: "The latest signed checkpoint of a tenant's audit log (public: its size and root hash, no entry)",
  access: { public: true },
  // Public and about any tenant: the tenant is what is asked for, never the caller's own.
  tenantScoped: false,
  input: z.object({ tenantId }).strict(),
  output: auditCheckpointSchema,
});

const auditConsistency = method({
  kind: 'query',
  summary:
    "The RFC 6962 consistency proof from an earlier tree size of a tenant's audit log to one of its checkpoints (public)",
  access: { public: true },
  tenantScoped: false,
  input: z
    .object({
      tenantId,
      /** The size of the checkpoint the caller kept. */
      fromSize: treeSize.min(1).describe('The tree size of the checkpoint you kept, 1 or more'),
      /** The size of a checkpoint to prove it to; the latest when absent. */
      toSize: treeSize
        .min(1)
        .optional()
        .describe('The tree size of a checkpoint to prove it to; the latest when omitted'),
    })
    .strict(),
  output: z.object({
    tenantId: z.string(),
    fromSize: treeSize,
    /** The checkpoint proved to, signed. */
    checkpoint: auditCheckpointSchema,
    /** The proof's hashes, base64, in RFC 9162 order; empty when the sizes are equal. */
    proof: z.array(base64Hash),
  }),
});

/** The `audit` group: each method's name and route (`/audit/…`) come from here. */
export const auditGroup = defineGroup(
  'audit',
  { module: 'audit' },
  { checkpoint: auditCheckpoint, consistency: auditConsistency },
);
