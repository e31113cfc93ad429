/** What a person reads before deciding a confirmation: who asks, for what, and exactly what would run. */
import { safeCell, safeJson } from '@better-compute/core';

export interface ConfirmationShown {
  id: string;
  agentId: string;
  personId: string;
  delegationId: string;
  method: string;
  reason: string;
  summary: string;
  state: string;
  expiresAt: string;
}

/** The lines `approve` and `decline` print first. The summary is the agent's data, shown inert. */
export function reviewLines(confirmation: ConfirmationShown): string[] {
  return [
    `Confirmation ${confirmation.id} (${confirmation.state}, until ${confirmation.expiresAt})`,
    `Agent ${confirmation.agentId} acting for ${confirmation.personId} (delegation ${confirmation.delegationId}) asks to run:`,
    `  ${safeCell(safeJson(confirmation.summary))}`,
    `Held because ${safeCell(confirmation.reason)}.`,
  ];
}
