/** The `drivers` group: the machine drivers this build supports. */
import { z } from 'zod';
import { defineGroup, method } from '../group.js';
import { pageOf, tenantId } from './common.js';

const driverSchema = z.object({
  name: z.string(),
  summary: z.string(),
  classes: z.array(z.enum(['gpu', 'vps', 'metal'])),
  /** How machines of this driver join: the node daemon with a join token, or the simulator. */
  joins: z.enum(['join-token', 'simulated']),
  simulated: z.boolean(),
});

const driversList = method({
  kind: 'query',
  summary: 'The registered drivers',
  tenantScoped: true,
  input: z.object({ tenantId }).strict(),
  output: pageOf(driverSchema),
});

/** The `drivers` group: each method's name, route (`/drivers/…`) and default IAM action come from here. */
export const driversGroup = defineGroup(
  'drivers',
  { module: 'fleet' },
  {
    list: driversList,
  },
);
