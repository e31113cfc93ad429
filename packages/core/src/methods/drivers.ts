/** The `drivers` group: the machine drivers this build supports. */
import { z } from 'zod';
import { defineMethod } from '../contract.js';
import { pageOf, tenantId } from './common.js';

export const driverSchema = z.object({
  name: z.string(),
  summary: z.string(),
  classes: z.array(z.enum(['gpu', 'vps', 'metal'])),
  /** How machines of this driver join: the node daemon with a join token, or the simulator. */
  joins: z.enum(['join-token', 'simulated']),
  simulated: z.boolean(),
});

export const driversList = defineMethod({
  group: 'drivers',
  name: 'list',
  kind: 'query',
  summary: 'The registered drivers',
  module: 'fleet',
  access: { action: 'compute:drivers:read' },
  tenantScoped: true,
  input: z.object({ tenantId }).strict(),
  output: pageOf(driverSchema),
});
