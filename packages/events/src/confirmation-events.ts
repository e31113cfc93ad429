/**
 * The events of delegated confirmation (docs/confirmations.md), spread into the catalog
 * (catalog.ts): a confirmation asked for, approved, declined, and spent by the call it held.
 */
import { z } from 'zod';

/** A confirmation's step: who asked, for whom, under which delegation, and which method would run. */
const confirmationData = z.object({
  agentId: z.string(),
  personId: z.string(),
  delegationId: z.string(),
  method: z.string(),
  action: z.string(),
});

const step = (summary: string) => ({ subject: 'confirmation' as const, data: confirmationData, summary });

export const confirmationEventTypes = {
  'confirmation.requested': step('An agent’s call waits for its person’s confirmation'),
  'confirmation.approved': step(
    'A person approved what their agent asked to run; its retry runs once within the window',
  ),
  'confirmation.declined': step('A confirmation was declined: the agent’s call never runs'),
  'confirmation.consumed': step('An approved confirmation was used: the agent’s call ran'),
} as const;
