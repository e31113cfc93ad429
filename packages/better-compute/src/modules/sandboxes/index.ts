/** What the parts of the server outside modules/ use of the sandboxes module: who owns a sandbox. */
export { sandboxOwner } from './sandboxes.js';
