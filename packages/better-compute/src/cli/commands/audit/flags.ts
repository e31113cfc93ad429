/** Flags the audit commands share. */
export const pkiFlag = {
  type: 'string',
  description: 'The PKI bundle (default: the configuration’s pki, else .better-compute/pki.json)',
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
