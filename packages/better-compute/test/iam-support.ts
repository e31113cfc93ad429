/** Principals the suites make in the embedded Better IAM. */
import type { ComputeInstance } from '../src/types.js';

type EmbeddedIam = NonNullable<ComputeInstance['embeddedIam']>;

/**
 * An agent acting for `actingFor`, bound to `role` in its tenant, with an API key of its own. The
 * rest of `agent` (a spend limit, a display name) goes to createAgent as given.
 */
export async function agentWithKey(
  iam: EmbeddedIam,
  agent: Parameters<EmbeddedIam['createAgent']>[0] & { role: string },
): Promise<{ id: string; key: string }> {
  const { role, ...fields } = agent;
  const created = await iam.createAgent(fields);
  await iam.createBinding({ tenantId: agent.tenantId, role, principalId: created.id });
  return { id: created.id, key: (await iam.createApiKey(created.id, { name: 'agent' })).key };
}
