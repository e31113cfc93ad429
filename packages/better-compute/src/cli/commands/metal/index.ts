/** The bare-metal commands (site-tokens, metal), in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import siteTokensCreate from './site-tokens/create.js';
import siteTokensRevoke from './site-tokens/revoke.js';
import metalEnroll from './enroll.js';
import metalList from './list.js';
import metalGet from './get.js';
import metalManage from './manage.js';
import metalInspect from './inspect.js';
import metalProvide from './provide.js';
import metalPower from './power.js';
import metalRetire from './retire.js';
import metalAbort from './abort.js';
import metalRecover from './recover.js';
import metalBulk from './bulk.js';
import metalDiscovered from './discovered.js';
import metalConfirmMac from './confirm-mac.js';

export const metalCommands: readonly AnyCommand[] = [
  siteTokensCreate,
  siteTokensRevoke,
  metalEnroll,
  metalList,
  metalGet,
  metalManage,
  metalInspect,
  metalProvide,
  metalPower,
  metalRetire,
  metalAbort,
  metalRecover,
  metalBulk,
  metalDiscovered,
  metalConfirmMac,
] as readonly AnyCommand[];
