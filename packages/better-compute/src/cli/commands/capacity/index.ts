/** The capacity commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import sim from '../operate/sim.js';
import capacity from './capacity.js';
import driversList from './drivers/list.js';
import extend from './extend.js';
import offersAccept from './offers/accept.js';
import offersDecline from './offers/decline.js';
import offersList from './offers/list.js';
import poolsArchive from './pools/archive.js';
import poolsCreate from './pools/create.js';
import poolsGet from './pools/get.js';
import poolsList from './pools/list.js';
import poolsOffer from './pools/offer.js';
import poolsUnoffer from './pools/unoffer.js';
import poolsUpdate from './pools/update.js';
import quotasGet from './quotas/get.js';
import quotasSet from './quotas/set.js';
import release from './release.js';
import reservationsGet from './reservations/get.js';
import reservationsList from './reservations/list.js';
import reserve from './reserve.js';

export const capacityCommands: readonly AnyCommand[] = [
  poolsList,
  poolsGet,
  poolsCreate,
  poolsUpdate,
  poolsArchive,
  poolsOffer,
  poolsUnoffer,
  offersList,
  offersAccept,
  offersDecline,
  capacity,
  reserve,
  reservationsList,
  reservationsGet,
  extend,
  release,
  quotasGet,
  quotasSet,
  driversList,
  sim,
] as readonly AnyCommand[];
