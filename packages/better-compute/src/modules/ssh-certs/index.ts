/** What the parts of the server outside modules/ use of the ssh-certs module: the deployment's keys. */
export { createKeyLoader } from './keys.js';
