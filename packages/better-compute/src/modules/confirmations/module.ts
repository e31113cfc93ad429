/**
 * The confirmations module: `confirmations.*`, delegated confirmation (docs/confirmations.md). The
 * pipeline asks it, through its index, whether an agent's call may run (http/confirmation.ts).
 */
import { confirmationsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { approveConfirmation, declineConfirmation } from './decide.js';
import { confirmationsMigrations } from './migrations.js';
import { confirmationOwner, getConfirmation, listConfirmations } from './read.js';

export const confirmationsModule = defineModule({
  name: 'confirmations',
  migrations: confirmationsMigrations,
  methods: [
    implement(
      confirmationsGroup,
      {
        list: listConfirmations,
        get: getConfirmation,
        approve: approveConfirmation,
        decline: declineConfirmation,
      },
      { get: confirmationOwner, approve: confirmationOwner, decline: confirmationOwner },
    ),
  ],
});
