/**
 * Billing meters (migration 0007): the units usage exports are counted in, created idempotently by
 * `better-compute iam setup --meters` and listed for billing. A meter is never redefined in place:
 * one that exists under the name with another definition is reported, not changed.
 */
import type { EnsuredMeters, Iam, Meter, MeterDefinition } from '../api.js';
import type { IamContext } from '../context.js';
import { iso } from '../rows.js';

const same = (a: MeterDefinition, b: MeterDefinition) =>
  a.unit === b.unit &&
  a.aggregation === b.aggregation &&
  a.dimensions.length === b.dimensions.length &&
  a.dimensions.every((d, i) => d === b.dimensions[i]);

export function meterService(ctx: IamContext): Pick<Iam, 'ensureMeters' | 'listMeters'> {
  const listMeters = async (): Promise<Meter[]> =>
    (await ctx.db.selectFrom('iam.meters').selectAll().orderBy('name').execute()).map((row) => ({
      name: row.name,
      unit: row.unit,
      aggregation: row.aggregation,
      dimensions: row.dimensions,
      description: row.description,
      createdAt: iso(row.created_at),
    }));
  return {
    listMeters,
    async ensureMeters(meters) {
      const result: EnsuredMeters = { created: [], existing: [], different: [] };
      if (meters.length === 0) return result;
      await ctx.db.transaction().execute(async (trx) => {
        const inserted = await trx
          .insertInto('iam.meters')
          .values(
            meters.map((m) => ({
              name: m.name,
              unit: m.unit,
              aggregation: m.aggregation,
              dimensions: m.dimensions,
              description: m.description,
            })),
          )
          .onConflict((oc) => oc.column('name').doNothing())
          .returning('name')
          .execute();
        const created = new Set(inserted.map((row) => row.name));
        const rows = await trx
          .selectFrom('iam.meters')
          .selectAll()
          .where(
            'name',
            'in',
            meters.map((m) => m.name),
          )
          .execute();
        const byName = new Map(rows.map((row) => [row.name, row]));
        for (const meter of meters) {
          if (created.has(meter.name)) result.created.push(meter.name);
          else if (same(byName.get(meter.name)!, meter)) result.existing.push(meter.name);
          else result.different.push(meter.name);
        }
      });
      return result;
    },
  };
}
