/**
 * Bare metal on this machine, with real parts (research/bare-metal-lab.md): a QEMU machine (TCG)
 * with no disk whose BMC is OpenIPMI's ipmi_sim, on a provisioning network served by the daemon's
 * ProvisioningNetwork (dnsmasq and busybox httpd in a network namespace, on a bridge it makes).
 *
 * Through the IPMI driver the machine is powered on and PXE-boots; its MAC is reported as
 * discovered, with its UUID; a boot entry set for it is what it boots after a power cycle (a
 * kernel and busybox initramfs printing this run's marker); power off ends QEMU. The Redfish
 * driver then does the same against a Redfish BMC the suite serves, whose system is this machine
 * (its calls become IPMI calls). And the refusals: a wrong BMC password, a BMC that does not answer,
 * a malformed MAC. Stop leaves nothing behind, and a start over a killed run's directory sweeps it.
 *
 * Runs as root (the guest project), with the host group `guest` of scripts/host-tools.mjs and the
 * lab's boot files (scripts/build-metal-lab.sh, cached outside the repository).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStart } from '../src/runtimes/ledger.js';
import {
  BmcError,
  createIpmiDriver,
  createRedfishDriver,
  ProvisioningNetwork,
  sweepProvisioningNetwork,
  waitForPowerState,
  type DiscoveryEvent,
  type IpmiDriver,
} from '../src/metal/index.js';
import { freeUdpPort, LabMachine } from './metal/lab-machine.js';
import {
  certificateAuthority,
  driverBackend,
  serverCertificate,
  startRedfishEmulator,
} from './metal/redfish-emulator.js';

const root = join(import.meta.dirname, '..', '..', '..');
const BMC_USER = 'admin';
const BMC_PASSWORD = `lab-${randomBytes(6).toString('hex')}`;
const MAC = `52:54:00:${randomBytes(3).toString('hex').match(/../g)!.join(':')}`;
const UUID = '7e3f0c1a-5b2d-4c8e-9f10-2a3b4c5d6e7f';
// One place per checkout, so a run that was killed is cleaned up by the next (and two checkouts'
// runs never meet): the lab's directory, its tap, and the provisioning network's names from them.
const checkout = createHash('sha256').update(root).digest('hex').slice(0, 8);
const TAP = `bclt-${checkout}`;
const scratch = join(tmpdir(), `bc-metal-${checkout}`);
const serviceDir = join(scratch, 'pxe');
let lab: { vmlinuz: string; initrd: string };
let service: ProvisioningNetwork;
let machine: LabMachine;
let ipmi: IpmiDriver;
const discovered: DiscoveryEvent[] = [];
const log: string[] = [];

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  what: string,
  probe: () => T | undefined | null | false,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline)
      throw new Error(
        `${what}: not within ${timeoutMs} ms\n--- console ---\n${machine?.console().slice(-2000)}\n--- service ---\n${service?.recentOutput().slice(-30).join('\n')}`,
      );
    await sleep(100);
  }
}

/** How long `work` takes, in ms. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  await work();
  return Date.now() - started;
}

/** What a killed run of this suite left: its machine's QEMU and BMC, its services, its tap and files. */
async function sweepLeftovers(): Promise<void> {
  if (!existsSync(scratch)) return;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      if (!['qemu-system-x86', 'ipmi_sim'].includes(comm)) continue;
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${scratch}/`))
        process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  for (const name of readdirSync(scratch))
    if (existsSync(join(scratch, name, 'private'))) await sweepProvisioningNetwork(join(scratch, name));
  spawnSync('ip', ['link', 'del', TAP], { stdio: 'ignore' });
  rmSync(scratch, { recursive: true, force: true });
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the metal lab runs as root (the guest project does)');
  for (const tool of ['ipmitool', 'ipmi_sim', 'dnsmasq', 'busybox', 'qemu-system-x86_64'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(`${tool} is missing: run node scripts/host-tools.mjs guest`);
  const built = spawnSync(join(root, 'scripts', 'build-metal-lab.sh'), [], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`build-metal-lab.sh failed:\n${built.stderr}`);
  const dir = built.stdout.trim().split('\n').at(-1)!;
  lab = { vmlinuz: join(dir, 'vmlinuz'), initrd: join(dir, 'initrd.gz') };

  await sweepLeftovers();
  mkdirSync(scratch, { mode: 0o755 }); // dnsmasq and httpd (nobody) read what the service serves under it.
  ip('tuntap', 'add', 'dev', TAP, 'mode', 'tap');
  spawnSync('sysctl', ['-qw', `net.ipv6.conf.${TAP}.disable_ipv6=1`]);
  service = await ProvisioningNetwork.start({
    dir: serviceDir,
    subnet: '10.77.0.0/24',
    uplinks: [TAP],
    discoveryImage: {
      kernel: lab.vmlinuz,
      initrd: lab.initrd,
      cmdline: 'console=ttyS0,115200 rdinit=/init metal_lab=discovery quiet',
    },
    onDiscovery: (event) => discovered.push(event),
    log: (line) => log.push(line),
  });
  machine = await LabMachine.start({
    dir: join(scratch, 'machine'),
    tap: TAP,
    mac: MAC,
    uuid: UUID,
    bmcUser: BMC_USER,
    bmcPassword: BMC_PASSWORD,
  });
  ipmi = createIpmiDriver({
    host: '127.0.0.1',
    port: machine.ipmiPort,
    credentials: { username: BMC_USER, password: BMC_PASSWORD },
  });
}, 180_000);

afterAll(async () => {
  await machine?.stop();
  await service?.stop();
  spawnSync('ip', ['link', 'del', TAP], { stdio: 'ignore' });
  rmSync(scratch, { recursive: true, force: true });
});

describe('a machine with an IPMI BMC on the provisioning network', () => {
  it('powers on through IPMI, PXE-boots from the service and is reported as discovered, once per DHCP exchange', async () => {
    expect(await ipmi.power('status')).toBe('off');
    expect(machine.qemuPid()).toBeNull();
    await ipmi.setBootDevice('pxe');
    expect(readFileSync(machine.chassisLog, 'utf8')).toContain('set boot pxe');

    const poweredOn = Date.now();
    await ipmi.power('on');
    const pid = await until('QEMU starts', () => machine.qemuPid(), 5000);
    expect(processStart(pid)).not.toBeNull();
    await waitForPowerState(ipmi, 'on', 5000);

    const event = await until('the discovery event', () => discovered.find((e) => e.mac === MAC), 30_000);
    expect(event).toMatchObject({
      mac: MAC,
      type: 'discover',
      uuid: UUID,
      userClass: ['iPXE'],
      clientArch: 0,
    });
    expect(event.vendorClass).toMatch(/^PXEClient:Arch:00000/);
    // The discovery script booted the discovery image; nothing bound the machine.
    // Within seconds of power on: SeaBIOS, then the NIC's iPXE asks for an address.
    expect(Date.now() - poweredOn).toBeLessThan(30_000);
    await machine.waitForConsole(/=== metal-lab: .* metal_lab=discovery .*BOOTIF=52:54:00/, 0, 60_000);
    expect(machine.console()).toContain('has no boot entry; booting the discovery image');
    expect(service.bootEntries().size).toBe(0);
    const exchanges = discovered.filter((e) => e.mac === MAC).map((e) => e.at.getTime());
    expect(exchanges.length).toBe(1);
  }, 120_000);

  it('boots the entry set for its MAC after a power cycle, and is no longer reported', async () => {
    const marker = randomBytes(8).toString('hex');
    // Written as a label shows it: upper case with dashes.
    await service.setBootEntry(MAC.toUpperCase().replace(/:/g, '-'), {
      kernel: lab.vmlinuz,
      initrd: lab.initrd,
      cmdline: `console=ttyS0,115200 rdinit=/init metal_marker=${marker} quiet`,
    });
    expect([...service.bootEntries().keys()]).toEqual([MAC]);
    const reported = discovered.length;
    const from = machine.console().length;
    const before = machine.qemuPid();

    await ipmi.power('cycle');
    const after = await until(
      'a new QEMU after the cycle',
      () => {
        const now = machine.qemuPid();
        return now !== null && now !== before ? now : null;
      },
      15_000,
    );
    expect(before === null || processStart(before) === null).toBe(true);
    await machine.waitForConsole(new RegExp(`=== metal-lab: .* metal_marker=${marker} `), from, 60_000);
    expect(machine.console().slice(from)).toContain('booting the entry of');
    expect(discovered.length).toBe(reported);
    expect(machine.qemuPid()).toBe(after);
  }, 120_000);

  it('power off really stops QEMU', async () => {
    const pid = machine.qemuPid();
    expect(pid).not.toBeNull();
    await ipmi.power('off');
    const took = await machine.waitFor('QEMU ends', () => processStart(pid!) === null, 5000);
    expect(took).toBeLessThan(5000);
    expect(await ipmi.power('status')).toBe('off');
  }, 120_000);

  it('does the same through Redfish, against a Redfish BMC whose system is this machine', async () => {
    const issued = await serverCertificate(await certificateAuthority());
    const bmc = await startRedfishEmulator({
      username: BMC_USER,
      password: BMC_PASSWORD,
      backend: driverBackend(ipmi),
      tls: issued,
    });
    try {
      const redfish = createRedfishDriver({
        url: bmc.url,
        credentials: { username: BMC_USER, password: BMC_PASSWORD },
        trust: { fingerprint256: issued.fingerprint },
      });
      expect(await redfish.power('status')).toBe('off');
      await redfish.setBootDevice('pxe', { persistent: true });
      const from = machine.console().length;
      await redfish.power('on');
      const pid = await until('QEMU starts through Redfish', () => machine.qemuPid(), 5000);
      await machine.waitForConsole(/=== metal-lab: .* metal_marker=[0-9a-f]{16} /, from, 60_000);
      expect(await redfish.power('status')).toBe('on');
      await redfish.power('off');
      await machine.waitFor('QEMU ends through Redfish', () => processStart(pid) === null, 5000);
      expect(await redfish.power('status')).toBe('off');
      expect(bmc.sessions()).toBe(0);
    } finally {
      await bmc.close();
    }
  }, 120_000);
});

describe('the BMC password', () => {
  it('never reaches ipmitool through its argv', async () => {
    // A stand-in that writes down the command line it was given, then runs the real ipmitool.
    const spy = join(scratch, 'ipmitool-spy.sh');
    const seen = join(scratch, 'ipmitool-argv');
    writeFileSync(spy, `#!/bin/sh\nprintf '%s\\n' "$*" >> ${seen}\nexec ipmitool "$@"\n`, { mode: 0o755 });
    const driver = createIpmiDriver({
      host: '127.0.0.1',
      port: machine.ipmiPort,
      credentials: { username: BMC_USER, password: BMC_PASSWORD },
      ipmitool: spy,
    });
    expect(await driver.power('status')).toBe('off');
    const argv = readFileSync(seen, 'utf8');
    expect(argv).toContain(`-U ${BMC_USER}`);
    expect(argv).toContain('-E chassis power status');
    expect(argv).not.toContain(BMC_PASSWORD);
  });
});

describe('refusals, each clear and bounded', () => {
  it('a wrong BMC password: the BMC refused it, and the message does not hold it', async () => {
    const wrong = `wrong-${randomBytes(4).toString('hex')}`;
    const driver = createIpmiDriver({
      host: '127.0.0.1',
      port: machine.ipmiPort,
      credentials: { username: BMC_USER, password: wrong },
    });
    let error: unknown;
    const took = await timed(() => driver.power('status').catch((e: unknown) => (error = e)));
    expect(error).toBeInstanceOf(BmcError);
    expect(error).toMatchObject({
      code: 'INVALID_STATE',
      failure: 'auth',
      details: { bmc: 'auth', protocol: 'ipmi' },
    });
    expect((error as Error).message).toContain('refused the user or password');
    for (const secret of [wrong, BMC_PASSWORD])
      expect(JSON.stringify(error) + (error as Error).message).not.toContain(secret);
    expect(took).toBeLessThan(5000);
    // The wrong user is refused the same way.
    await expect(
      createIpmiDriver({
        host: '127.0.0.1',
        port: machine.ipmiPort,
        credentials: { username: 'nobody', password: BMC_PASSWORD },
      }).power('status'),
    ).rejects.toMatchObject({ failure: 'auth' });
  }, 120_000);

  it('a BMC that does not answer: a timeout within the bound', async () => {
    const silent: Socket = createSocket('udp4');
    const port = await freeUdpPort();
    await new Promise<void>((resolve) => silent.bind(port, '127.0.0.1', resolve));
    try {
      const driver = createIpmiDriver({
        host: '127.0.0.1',
        port,
        credentials: { username: BMC_USER, password: BMC_PASSWORD },
        timeoutMs: 4000,
      });
      let error: unknown;
      const took = await timed(() => driver.power('on').catch((e: unknown) => (error = e)));
      expect(error).toMatchObject({ code: 'UNAVAILABLE', failure: 'timeout' });
      expect((error as Error).message).toMatch(/did not answer/);
      expect(took).toBeLessThan(6000);
    } finally {
      silent.close();
    }
    await expect(
      createIpmiDriver({
        host: 'bmc.invalid',
        credentials: { username: BMC_USER, password: BMC_PASSWORD },
      }).power('status'),
    ).rejects.toMatchObject({ code: 'UNAVAILABLE', failure: 'unreachable' });
  }, 120_000);

  it('a malformed MAC or command line sets nothing', async () => {
    const nodes = () => readdirSync(join(serviceDir, 'http', 'nodes')).sort();
    const before = nodes();
    for (const mac of ['52:54:00:12:34', 'ff:ff:ff:ff:ff:ff', '52:54:00:12:34:5\u0000', 'x'.repeat(10_000)])
      await expect(service.setBootEntry(mac, 'local-disk')).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    await expect(
      service.setBootEntry('52:54:00:aa:bb:cc', { kernel: lab.vmlinuz, cmdline: 'quiet ${net0/ip}' }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(
      service.setBootEntry('52:54:00:aa:bb:cc', { kernel: join(scratch, 'no-such-kernel') }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(nodes()).toEqual(before);
    // 'local-disk' and null, for a MAC that is well formed.
    await service.setBootEntry('52:54:00:aa:bb:cc', 'local-disk');
    expect(readFileSync(join(serviceDir, 'http', 'nodes', '52-54-00-aa-bb-cc.ipxe'), 'utf8')).toContain(
      'sanboot',
    );
    await service.setBootEntry('52:54:00:aa:bb:cc', null);
    expect(nodes()).toEqual(before);
  });
});

describe('teardown', () => {
  const leftovers = (dir: string, names: { namespace: string; bridge: string; hostVeth: string }) => {
    const links = readdirSync('/sys/class/net')
      .filter((link) => [names.bridge, names.hostVeth].includes(link))
      .sort();
    const namespaces = existsSync('/run/netns')
      ? readdirSync('/run/netns').filter((n) => n === names.namespace)
      : [];
    const processes = readdirSync('/proc')
      .filter((pid) => /^\d+$/.test(pid))
      .filter((pid) => {
        try {
          return (
            readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${dir}/`) &&
            processStart(Number(pid)) !== null
          );
        } catch {
          return false;
        }
      });
    return { links, namespaces, processes, files: existsSync(dir) };
  };

  it('a start over the directory of a run that was killed sweeps what it left, and stop leaves nothing', async () => {
    const dir = join(scratch, 'killed');
    const first = await ProvisioningNetwork.start({
      dir,
      subnet: '10.78.0.0/24',
      onDiscovery: () => undefined,
    });
    const left = JSON.parse(readFileSync(join(dir, 'private', 'record.json'), 'utf8')) as {
      processes: { pid: number }[];
    };
    expect(left.processes.length).toBe(2);
    // The first is never stopped, as if its daemon had been killed; the next start finds it all.
    const second = await ProvisioningNetwork.start({
      dir,
      subnet: '10.78.0.0/24',
      onDiscovery: () => undefined,
    });
    for (const { pid } of left.processes) expect(processStart(pid)).toBeNull();
    expect(leftovers(dir, second.names)).toMatchObject({
      links: [second.names.hostVeth, second.names.bridge].sort(),
      namespaces: [second.names.namespace],
    });
    await second.stop();
    void first;
    expect(leftovers(dir, second.names)).toEqual({ links: [], namespaces: [], processes: [], files: false });
  }, 120_000);

  it('stopping the lab service releases its uplink and removes the rest', async () => {
    const names = service.names;
    await service.stop();
    expect(leftovers(serviceDir, names)).toEqual({ links: [], namespaces: [], processes: [], files: false });
    // The machine's tap is the test's: still there, on no bridge.
    expect(existsSync(`/sys/class/net/${TAP}`)).toBe(true);
    expect(existsSync(`/sys/class/net/${TAP}/master`)).toBe(false);
  }, 120_000);
});
