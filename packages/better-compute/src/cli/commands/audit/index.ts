/** The audit commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import auditVerify from './verify.js';
import auditProve from './prove.js';
import auditCheckProof from './check-proof.js';
import auditCheckpoint from './checkpoint.js';
import auditWitnessKeygen from './witness-keygen.js';
import auditWitnessCosign from './witness-cosign.js';

export const auditCommands: readonly AnyCommand[] = [
  auditVerify,
  auditProve,
  auditCheckProof,
  auditCheckpoint,
  auditWitnessKeygen,
  auditWitnessCosign,
] as readonly AnyCommand[];
