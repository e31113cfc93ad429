/** `pools unoffer POOL --to TENANT`. */
import { offerCommand } from './offer-command.js';

export default offerCommand('unoffer', 'Withdraw a pool’s offer from a tenant');
