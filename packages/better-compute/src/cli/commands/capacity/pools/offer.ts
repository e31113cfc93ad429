/** `pools offer POOL --to TENANT`. */
import { offerCommand } from './offer-command.js';

export default offerCommand('offer', 'Offer a pool to another tenant, so it can reserve from it');
