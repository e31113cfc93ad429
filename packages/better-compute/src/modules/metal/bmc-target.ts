/** The machine row a metal.bmc command names, for the gateway that opens its BMC password. */
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { type MachineRow, metalDb } from './tables.js';

export async function machineForBmc(
  db: Kysely<ComputeTables>,
  machineId: string,
): Promise<MachineRow | null> {
  const row = await metalDb(db)
    .selectFrom('compute.metal_machines')
    .selectAll()
    .where('id', '=', machineId)
    .executeTakeFirst();
  return row ?? null;
}
