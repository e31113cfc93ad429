/** What the metal commands share: the machine positional, the --reason flag and the table columns. */
export const machinePositional = {
  name: 'machine',
  description: 'The machine’s id (node_…)',
  required: true,
  kind: 'node',
} as const;

export const reasonFlag = {
  type: 'string',
  description: 'Why, for people and the audit log',
  placeholder: 'TEXT',
} as const;

export interface MachineView {
  id: string;
  name: string;
  siteId: string;
  provisionState: string;
  powerState: string;
  bmc: { driver: string; address: string };
  lastError: string | null;
}

export function machineColumns(m: MachineView): Record<string, unknown> {
  return {
    id: m.id,
    name: m.name,
    site: m.siteId,
    state: m.provisionState,
    power: m.powerState,
    bmc: `${m.bmc.driver} ${m.bmc.address}`,
    error: m.lastError ?? '',
  };
}
