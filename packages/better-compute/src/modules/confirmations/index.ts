/**
 * What the parts of the server outside modules/ use of the confirmations module: the pipeline's
 * store (http/confirmation.ts's ConfirmationStore), given to the handler by compute.ts.
 */
import { admit, consume, endRevoked, spentConfirmation } from './requests.js';

export const confirmationStore = { admit, consume, endRevoked, spent: spentConfirmation };
