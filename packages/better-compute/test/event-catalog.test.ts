/**
 * The event catalog (@better-compute/events) against what the server writes: after a run through
 * the fleet's flows, every event in the outbox has a declared type, the subject kind the catalog
 * gives it, and a payload its schema accepts with no field the schema lacks.
 */
import { eventTypes, isEventType } from '@better-compute/events';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { describe, expect, it } from 'vitest';
import {
  ACME,
  addNode,
  h100x8,
  heartbeat,
  nodeInventory,
  seedPool,
  suiteDeployment,
} from './fleet-support.js';

const kinds = await testDatabaseKinds();
const HOUR = 3600;

describe.each(kinds)('the event catalog on %s', (kind) => {
  const d = suiteDeployment(kind);

  it('describes every event the fleet writes: type, subject kind and payload', async () => {
    const { siteId, poolId } = await seedPool(d, 'catalog');
    await d.api('sites.update', { siteId, description: 'catalog site' });
    await d.api('pools.update', { poolId, description: 'catalog pool' });
    await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: 16 });
    await d.api('quotas.set', { poolId, subjectTenantId: 'acme', limit: null });
    const project = await d.api('projects.create', { name: 'catalog-project' });
    await d.api('projects.archive', { projectId: project.id });
    const { token, joinToken } = await d.api('joinTokens.create', { poolId });
    const joined = await d.api(
      'nodes.join',
      { joinToken: token, hostname: 'catalog-waiting', inventory: nodeInventory() },
      '',
    );
    await d.api('joinRequests.reject', { joinRequestId: joined.joinRequestId, reason: 'not this one' });
    await d.api('joinTokens.revoke', { joinTokenId: joinToken.id });
    const node = await addNode(d, poolId, 'catalog-h100', h100x8('catalog-nvl'));
    await d.api('nodes.label', { nodeId: node.nodeId, set: { zone: 'a' } });
    await d.api('nodes.taint', { nodeId: node.nodeId, add: [{ key: 'check' }] });
    await d.api('nodes.taint', { nodeId: node.nodeId, remove: ['check'] });

    const first = await d.api('reservations.create', { poolId, gpus: 8, durationSeconds: HOUR }, ACME);
    const second = await d.api('reservations.create', { poolId, gpus: 8, durationSeconds: HOUR }, ACME);
    expect(second.state).toBe('queued');
    await d.api('reservations.extend', { reservationId: first.id, bySeconds: HOUR }, ACME);
    await d.api('reservations.release', { reservationId: first.id }, ACME);
    await d.api('nodes.cordon', { nodeId: node.nodeId });
    await d.api('nodes.uncordon', { nodeId: node.nodeId });
    await d.api('nodes.drain', { nodeId: node.nodeId });
    await d.api('reservations.release', { reservationId: second.id }, ACME);
    await heartbeat(d, node.credential);
    await d.api('nodes.retire', { nodeId: node.nodeId });
    await d.api('pools.unoffer', { poolId, offerTenantId: 'globex' });

    const rows = await d.db
      .selectFrom('compute.events')
      .select(['type', 'subject_type', 'data'])
      .orderBy('tx_id')
      .orderBy('tx_index')
      .execute();
    const seen = new Set<string>();
    for (const row of rows) {
      expect(isEventType(row.type), row.type).toBe(true);
      if (!isEventType(row.type)) continue;
      seen.add(row.type);
      const spec = eventTypes[row.type];
      expect(row.subject_type, row.type).toBe(spec.subject);
      const parsed = spec.data.safeParse(row.data);
      expect(parsed.success, `${row.type}: ${JSON.stringify(row.data)}`).toBe(true);
      // A field the schema does not declare would be dropped by the parse: the payload must survive whole.
      expect(parsed.data, row.type).toEqual(row.data);
    }
    for (const type of [
      'site.created',
      'site.updated',
      'pool.created',
      'pool.updated',
      'pool.offered',
      'pool.unoffered',
      'quota.set',
      'project.created',
      'project.archived',
      'joinToken.created',
      'joinToken.revoked',
      'joinRequest.created',
      'joinRequest.rejected',
      'joinRequest.approved',
      'node.joining',
      'node.ready',
      'node.labeled',
      'node.tainted',
      'node.cordoned',
      'node.uncordoned',
      'node.draining',
      'node.drained',
      'node.retired',
      'reservation.created',
      'reservation.queued',
      'reservation.activated',
      'reservation.extended',
      'reservation.released',
    ])
      expect(seen, type).toContain(type);
  });
});
