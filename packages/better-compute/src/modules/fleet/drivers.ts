/**
 * The drivers this build supports: how machines of a pool are run. A static registry, not
 * configuration: a pool names one of these, and `drivers.list` shows them.
 */
export interface DriverInfo {
  name: string;
  summary: string;
  classes: ('gpu' | 'vps' | 'metal')[];
  joins: 'join-token' | 'simulated';
  simulated: boolean;
}

const DRIVERS: readonly DriverInfo[] = [
  {
    name: 'bcd',
    summary:
      'The better-compute node daemon: a machine joins with a join token and heartbeats with its node credential',
    classes: ['gpu', 'vps', 'metal'],
    joins: 'join-token',
    simulated: false,
  },
  {
    name: 'sim',
    summary:
      'Simulated machines of `sim` and `dev --sim`: they join and heartbeat through the same public routes, and their instances run in the sim runtime',
    classes: ['gpu', 'vps'],
    joins: 'simulated',
    simulated: true,
  },
];

export function findDriver(name: string): DriverInfo | undefined {
  return DRIVERS.find((driver) => driver.name === name);
}

/** `drivers.list`: every driver the fleet knows, in one page. */
export async function listDrivers() {
  return { items: DRIVERS.map((d) => ({ ...d, classes: [...d.classes] })), nextCursor: null };
}
