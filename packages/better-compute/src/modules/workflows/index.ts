/**
 * What the parts of the server outside modules/ use of the workflows module: its job's kind, and
 * the gateway's wake of a node's workflows when its daemon says hello.
 */
export { WORKFLOW_JOB, wakeNodeWorkflows } from './service.js';
