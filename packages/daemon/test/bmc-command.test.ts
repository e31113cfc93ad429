/**
 * metal.bmc on the daemon (bmc-command.ts), without a BMC: a worker node refuses it; a site agent
 * refuses a payload without the password the gateway adds, or with a bad action, before anything
 * is run; power off and reset are refused while the node pins an approver set, unless the
 * command passed the quorum check on arrival or (power off) the machine is off already; power on
 * sets the boot device it names first (a Redfish BMC the suite serves); and a BMC that cannot be reached fails with the driver's words, never the password. The
 * real BMC is metal-site.test.ts's ipmi_sim.
 */
import { createSocket } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { runBmcCommand } from '../src/bmc-command.js';
import {
  certificateAuthority,
  serverCertificate,
  startRedfishEmulator,
  stateBackend,
} from './metal/redfish-emulator.js';

const PASSWORD = 'bmc-secret-5a7c';
const payload = (bmc: Record<string, unknown> = {}, action = 'status') => ({
  machineId: 'node_01m00000000000000000000000',
  action,
  bmc: { driver: 'ipmi', address: '127.0.0.1', port: null, username: 'admin', password: PASSWORD, ...bmc },
});

describe('metal.bmc on a node', () => {
  it('a worker refuses it', async () => {
    const outcome = await runBmcCommand(payload(), { siteAgent: false });
    expect(outcome).toMatchObject({ state: 'failed', result: null });
    expect(outcome.error).toBe(
      'refused by the node: metal.bmc runs only on a site agent (bcd joined with a site token)',
    );
  });

  it('a site agent refuses a command without the password or with an unknown action', async () => {
    const { password: _password, ...bare } = payload().bmc;
    expect((await runBmcCommand({ ...payload(), bmc: bare }, { siteAgent: true })).error).toBe(
      'metal.bmc came without the BMC password; the gateway did not open it',
    );
    expect((await runBmcCommand(payload({}, 'cycle-forever'), { siteAgent: true })).error).toBe(
      'metal.bmc needs an action of on, off, reset, status and a bmc',
    );
  });

  it('while the node pins an approver set, power off and reset are refused unless the machine is off already', async () => {
    const backend = stateBackend();
    const issued = await serverCertificate(await certificateAuthority());
    const emulator = await startRedfishEmulator({
      username: 'admin',
      password: PASSWORD,
      backend,
      tls: issued,
    });
    const redfish = (action: string) => ({
      ...payload(
        { driver: 'redfish', port: Number(new URL(emulator.url).port), tlsFingerprint: issued.fingerprint },
        action,
      ),
    });
    try {
      // Off already: powering it off stops nothing, and the BMC's answer says so; no reset is sent.
      backend.power = 'Off';
      expect(await runBmcCommand(redfish('off'), { siteAgent: true, quorumPinned: true })).toMatchObject({
        state: 'succeeded',
        result: { powerState: 'off' },
      });
      backend.power = 'On';
      const refused = await runBmcCommand(redfish('off'), { siteAgent: true, quorumPinned: true });
      expect(refused.error).toBe(
        "refused by the node: power off through a BMC needs a batch's approvals while this node pins an approver set",
      );
      expect(backend.power).toBe('On');
      expect(backend.resets).toEqual([]);
      // Power on may set the boot device first: the network, for the deploy ramdisk.
      backend.power = 'Off';
      const on = await runBmcCommand({ ...redfish('on'), bootDevice: 'pxe' }, { siteAgent: true });
      expect(on).toMatchObject({ state: 'succeeded', result: { powerState: 'on' } });
      expect(backend.boot().target).toBe('Pxe');
      expect((await runBmcCommand({ ...redfish('off'), bootDevice: 'pxe' }, { siteAgent: true })).error).toBe(
        'metal.bmc takes a bootDevice of pxe or disk with power on only',
      );
    } finally {
      await emulator.close();
    }
  });

  it('while the node pins an approver set, reset is refused before the BMC is asked', async () => {
    for (const action of ['reset']) {
      const outcome = await runBmcCommand(payload({ port: 1 }, action), {
        siteAgent: true,
        quorumPinned: true,
      });
      expect(outcome).toMatchObject({ state: 'failed', result: null });
      expect(outcome.error).toBe(
        `refused by the node: power ${action} through a BMC needs a batch's approvals while this node pins an approver set`,
      );
      // Approved on arrival (agent.ts, bmc-quorum.test.ts): the guard lets it through to the BMC call,
      // here stopped at the next check so nothing is asked of a BMC.
      const { password: _password, ...bare } = payload().bmc;
      const approved = await runBmcCommand(
        { ...payload({}, action), bmc: bare },
        { siteAgent: true, quorumPinned: true, approved: true },
      );
      expect(approved.error).toBe('metal.bmc came without the BMC password; the gateway did not open it');
    }
  });

  it('a BMC that does not answer fails with the driver’s words, never the password', async () => {
    // A UDP port nobody answers on: ipmitool gives up within the driver's bound.
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    const port = socket.address().port;
    try {
      const outcome = await runBmcCommand(payload({ port }), { siteAgent: true });
      expect(outcome.state).toBe('failed');
      expect(outcome.error).toBeTruthy();
      expect(JSON.stringify(outcome)).not.toContain(PASSWORD);
    } finally {
      socket.close();
    }
  }, 120_000);
});
