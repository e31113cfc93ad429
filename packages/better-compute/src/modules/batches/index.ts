/**
 * What the parts of the server outside modules/ use of the batches module: the gateway sends each
 * member command with its batch's approvals and leaf proof, and welcomes daemons with the approver
 * chain; the metal module's bulk makes its batch as commandBatches.create does.
 */
export { createApproverLoader } from './approvers.js';
export { quorumAttachments } from './attachments.js';
export { batchProposer } from './create.js';
