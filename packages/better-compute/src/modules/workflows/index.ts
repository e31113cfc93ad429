/** What the parts of the server outside modules/ use of the workflows module: its job's kind. */
export { WORKFLOW_JOB } from './service.js';
