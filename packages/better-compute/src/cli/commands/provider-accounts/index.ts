/** The provider-accounts commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import providerAccountsList from './list.js';
import providerAccountsGet from './get.js';
import providerAccountsCreate from './create.js';
import providerAccountsUpdate from './update.js';
import providerAccountsDelete from './delete.js';
import providerAccountsOffers from './offers.js';
import providerAccountsBootstrap from './bootstrap.js';

export const providerAccountsCommands: readonly AnyCommand[] = [
  providerAccountsList,
  providerAccountsGet,
  providerAccountsCreate,
  providerAccountsUpdate,
  providerAccountsDelete,
  providerAccountsOffers,
  providerAccountsBootstrap,
] as readonly AnyCommand[];
