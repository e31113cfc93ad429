/**
 * metal.bmc on a site agent: one call to a machine's BMC with the drivers of this folder, the
 * password as the gateway put it in the signed command. The password lives in this call's memory
 * only: it is not in the ledger (the outcome holds the power state or a scrubbed error), a log
 * line, argv (ipmitool reads it from its environment) or a file. A worker node refuses the kind.
 */
import { type CommandOutcome, outcomeOf } from './state.js';
import { BmcError, scrubbed } from './metal/bmc.js';
import { createBmcDriver, type BmcTarget } from './metal/index.js';

const ACTIONS = ['on', 'off', 'reset', 'status'] as const;
type Action = (typeof ACTIONS)[number];

/** How long a power change may take to show in the BMC's status (Ironic polls the same way). */
const SETTLE_MS = 20_000;

export async function runBmcCommand(
  payload: Record<string, unknown>,
  options: {
    siteAgent: boolean;
    /**
     * Whether this node pinned an approver set (the deployment's destructive-batch quorum is on):
     * then power off and reset run only when `approved`, so a row written to the database alone
     * never powers a machine off.
     */
    quorumPinned?: boolean;
    /**
     * Whether the command passed the daemon's quorum check on arrival (approvers.ts quorumRefusal):
     * a threshold of the pinned set's approvals over a metal.bmc-power leaf naming this machine,
     * this action, this node as runner and this BMC. docs/decisions/metal-power-quorum.md.
     */
    approved?: boolean;
    ipmitool?: string | undefined;
  },
): Promise<CommandOutcome> {
  if (!options.siteAgent)
    return outcomeOf(
      'failed',
      null,
      'refused by the node: metal.bmc runs only on a site agent (bcd joined with a site token)',
    );
  const action = payload.action as Action;
  const bmc = payload.bmc as Record<string, unknown> | undefined;
  if (!ACTIONS.includes(action) || !bmc || typeof bmc !== 'object')
    return outcomeOf('failed', null, 'metal.bmc needs an action of on, off, reset, status and a bmc');
  // Power on may first set the device the machine boots from (the network, for the deploy ramdisk).
  const bootDevice = payload.bootDevice;
  if (bootDevice !== undefined && (action !== 'on' || (bootDevice !== 'pxe' && bootDevice !== 'disk')))
    return outcomeOf('failed', null, 'metal.bmc takes a bootDevice of pxe or disk with power on only');
  const held = options.quorumPinned && !options.approved && (action === 'off' || action === 'reset');
  const password = typeof bmc.password === 'string' ? bmc.password : '';
  if (!password)
    return outcomeOf('failed', null, 'metal.bmc came without the BMC password; the gateway did not open it');
  const credentials = { username: String(bmc.username ?? ''), password };
  const port = typeof bmc.port === 'number' ? bmc.port : undefined;
  const target: BmcTarget =
    bmc.driver === 'redfish'
      ? {
          protocol: 'redfish',
          url: `https://${String(bmc.address)}${port ? `:${port}` : ''}`,
          credentials,
          // Pinned at enrolment; without it the driver refuses (it never trusts an unpinned BMC).
          ...(typeof bmc.tlsFingerprint === 'string'
            ? { trust: { fingerprint256: bmc.tlsFingerprint } }
            : {}),
        }
      : {
          protocol: 'ipmi',
          host: String(bmc.address),
          ...(port ? { port } : {}),
          credentials,
          ...(options.ipmitool ? { ipmitool: options.ipmitool } : {}),
        };
  try {
    const driver = createBmcDriver(target);
    if (action === 'status') return outcomeOf('succeeded', { powerState: await driver.power('status') });
    if (held) {
      // Powering off a machine that is off stops nothing: a workflow's first step (inspection's)
      // may ask it without a batch. Anything else waits for the approvers.
      if (action === 'off' && (await driver.power('status')) === 'off')
        return outcomeOf('succeeded', { powerState: 'off' });
      return outcomeOf(
        'failed',
        null,
        `refused by the node: power ${action} through a BMC needs a batch's approvals while this node pins an approver set`,
      );
    }
    if (bootDevice === 'pxe' || bootDevice === 'disk') await driver.setBootDevice(bootDevice);
    await driver.power(action);
    // Reset leaves a machine on; on and off are waited for until the BMC reports them.
    const want = action === 'off' ? 'off' : 'on';
    const deadline = Date.now() + SETTLE_MS;
    let state = await driver.power('status');
    while (state !== want && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      state = await driver.power('status');
    }
    return state === want
      ? outcomeOf('succeeded', { powerState: state })
      : outcomeOf(
          'failed',
          { powerState: state },
          `the BMC accepted power ${action} but the machine is still ${state}`,
        );
  } catch (error) {
    // Driver errors are scrubbed already; anything else is scrubbed here, never trusted to be.
    const message =
      error instanceof BmcError
        ? error.message
        : scrubbed(String((error as Error)?.message ?? error), [password]);
    return outcomeOf(
      'failed',
      error instanceof BmcError ? { bmc: error.failure } : null,
      scrubbed(message, [password], 500),
    );
  }
}
