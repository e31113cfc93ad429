/** The capacity module: `capacity.get`, `capacity.preview` and the `reservations` group (tables in the fleet module). */
import { methods } from '@better-compute/core/methods';
import { bindMethod, defineModule } from '../define-module.js';
import {
  createReservation,
  extendReservation,
  getCapacity,
  getReservation,
  listReservations,
  previewCapacity,
  releaseReservation,
  reservationOwner,
} from './service.js';

export const capacityModule = defineModule({
  name: 'capacity',
  methods: [
    bindMethod(methods['capacity.get'], getCapacity),
    bindMethod(methods['capacity.preview'], previewCapacity),
    bindMethod(methods['reservations.create'], createReservation),
    bindMethod(methods['reservations.get'], getReservation),
    bindMethod(methods['reservations.list'], listReservations),
    bindMethod(methods['reservations.extend'], extendReservation, { owner: reservationOwner }),
    bindMethod(methods['reservations.release'], releaseReservation, { owner: reservationOwner }),
  ],
});
