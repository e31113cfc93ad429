/** Flags the audit commands share. */
export const pkiFlag = {
  type: 'string',
  description:
    'The PKI bundle (default: the configuration’s pki, else BETTER_COMPUTE_PKI, else .better-compute/pki.json)',
  placeholder: 'PATH',
} as const;

export const pinFlag = {
  type: 'string',
  description: 'The audit key’s pin, sha256/… (default: BETTER_COMPUTE_AUDIT_PIN, else the bundle’s)',
  placeholder: 'PIN',
} as const;

export const tenantFlag = {
  type: 'string',
  required: true,
  description: 'The tenant whose audit log to read',
  placeholder: 'TENANT',
} as const;

export const trustedFlag = {
  type: 'string',
  description:
    'Checkpoints you kept (signed notes, or the JSON audit.checkpoint or its webhook gave): the log must still extend each',
  placeholder: 'FILE',
} as const;

export const witnessFlag = {
  type: 'string',
  repeated: true,
  description: 'A witness’s verifier key (NAME+keyid+base64, from `audit witness keygen`); repeat for each',
  placeholder: 'KEY',
} as const;

export const minWitnessesFlag = {
  type: 'number',
  integer: true,
  min: 1,
  max: 100,
  description:
    'How many of the --witness keys must have cosigned a --trusted checkpoint (default: 1 with --witness)',
  placeholder: 'N',
} as const;
