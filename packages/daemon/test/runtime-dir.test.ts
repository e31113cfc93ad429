/**
 * Where a node's runtime puts what is not a file of its state directory, and how it takes it all
 * away again. The VMs' sockets live in a short runtime directory keyed by the state directory, so a
 * state directory of any length works, and one still too long is refused naming the setting that
 * moves it. `bcd sweep` (the real binary, as root) removes what a killed daemon left under a
 * 150-character state directory: a loop-mounted volume and a stray mount, a process the ledger
 * names and a bwrap naming the state directory, and no process that merely took a recorded pid.
 * The nftables table every daemon of a machine shares, which such a sweep removes once no instance
 * link is left, is there again for the next instance network another daemon makes.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BwrapDriver, ImageCache } from '../src/runtimes/index.js';
import { Ledger, processStart } from '../src/runtimes/ledger.js';
import { machineArgs } from '../src/runtimes/qemu-process.js';
import { agentDevices } from '../src/runtimes/qemu-sandbox.js';
import {
  ensurePrivateDir,
  makeSocketDir,
  RUNTIME_DIR_SETTING,
  runtimeDirFor,
  stateDirKey,
} from '../src/runtimes/runtime-dir.js';
import { networkOf, VmNetwork } from '../src/runtimes/vm-network.js';
import { bcd } from './daemon-support.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-rundir-'));
/** A state directory whose path is exactly 150 characters, as a deep checkout's would be. */
function longStateDir(name: string): string {
  const base = join(scratch, name);
  return `${base}-${'x'.repeat(150 - base.length - 1)}`;
}
const root = process.getuid?.() === 0;
const started: number[] = [];

afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

const alive = (pid: number) => processStart(pid) !== null;
const mountsUnder = (dir: string) =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${dir}/`));
const loopsUnder = (dir: string) => {
  const listed = JSON.parse(
    execFileSync('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE'], { encoding: 'utf8' }) ||
      '{"loopdevices":[]}',
  ) as { loopdevices: { name: string; 'back-file': string | null }[] };
  return listed.loopdevices.filter((device) => device['back-file']?.startsWith(`${dir}/`));
};

describe('the runtime directory', () => {
  it('is short and keyed by the state directory: the same for one, another for another, whatever their length', () => {
    const long = longStateDir('state');
    expect(long).toHaveLength(150);
    const asRoot = runtimeDirFor(long, {}, 0);
    expect(asRoot).toBe(`/run/better-compute/${stateDirKey(long)}`);
    expect(stateDirKey(long)).toMatch(/^[0-9a-f]{16}$/);
    expect(runtimeDirFor(`${long}/`, {}, 0)).toBe(asRoot);
    expect(runtimeDirFor('/var/lib/bcd', {}, 0)).not.toBe(asRoot);
    expect(runtimeDirFor('/var/lib/bcd', {}, 0)).toHaveLength(asRoot.length);
    // Another user: its XDG runtime directory, else its own directory under /tmp.
    expect(runtimeDirFor(long, { XDG_RUNTIME_DIR: '/run/user/1000' }, 1000)).toBe(
      `/run/user/1000/better-compute/${stateDirKey(long)}`,
    );
    expect(runtimeDirFor(long, {}, 1000)).toBe(`/tmp/better-compute-1000/${stateDirKey(long)}`);
    // The setting moves it, for everyone.
    expect(runtimeDirFor(long, { BCD_RUNTIME_DIR: '/srv/bcd-run' }, 0)).toBe('/srv/bcd-run');
  });

  it('holds the VM sockets of a 150-character state directory; a runtime directory still too long is refused naming the setting', () => {
    const long = longStateDir('vm');
    const runtimeDir = join(scratch, 'run');
    const sockets = makeSocketDir(runtimeDir, 'inst_01JXAMPLE0000000000000000');
    const args = machineArgs({
      name: 'inst_01JXAMPLE0000000000000000',
      dir: join(long, 'instances', 'inst_01JXAMPLE0000000000000000'),
      sockets,
      accel: 'tcg',
      vcpus: 1,
      memoryMiB: 512,
      boot: null,
      network: { tap: { ifname: 'tap0', mac: '52:54:00:00:00:06' } },
      console: 'socket',
      extra: agentDevices(sockets),
    });
    const socketArgs = args.filter((arg) => arg.includes('.sock'));
    expect(socketArgs).toHaveLength(3);
    for (const arg of socketArgs) expect(arg).toContain(`${sockets}/`);
    // The disk and the pidfile stay in the state directory, whose length does not matter to them.
    expect(args).toContain(join(long, 'instances', 'inst_01JXAMPLE0000000000000000', 'qemu.pid'));
    expect(() =>
      machineArgs({
        name: 'x',
        dir: long,
        sockets: join('/run', 'y'.repeat(100)),
        accel: 'tcg',
        vcpus: 1,
        memoryMiB: 512,
        boot: null,
        network: { user: { sshPort: 2222, restrict: true } },
        console: 'ring',
        extra: [],
      }),
    ).toThrow(`move the runtime directory to a shorter path with ${RUNTIME_DIR_SETTING}`);
    expect(RUNTIME_DIR_SETTING).toBe('bcd run --runtime-dir DIR (or BCD_RUNTIME_DIR)');
  });

  it.runIf(root)('is private: made 0700, and one another user made is refused rather than used', () => {
    const mine = join(scratch, 'better-compute-private', 'key');
    ensurePrivateDir(mine);
    expect(execFileSync('stat', ['-c', '%a %u', mine], { encoding: 'utf8' }).trim()).toBe('700 0');
    const theirs = join(scratch, 'better-compute-theirs', 'key');
    mkdirSync(theirs, { recursive: true, mode: 0o700 });
    chownSync(theirs, 65534, 65534);
    expect(() => ensurePrivateDir(theirs)).toThrow(
      `${theirs} is not a directory of this user (uid 0), so the daemon will not put its sockets there`,
    );
  });
});

describe.runIf(root)('bcd sweep', () => {
  it('removes what a killed daemon left under a 150-character state directory, and nothing else', async () => {
    const stateDir = longStateDir('swept');
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    const runtimeDir = join(scratch, 'swept-run');
    const ledger = new Ledger(stateDir);
    // A volume, loop-mounted, as the bwrap runtime makes it (the ledger names its mount).
    const driver = new BwrapDriver(stateDir, new ImageCache(join(stateDir, 'images')));
    await driver.createVolume('vol_sweep', 1);
    expect(loopsUnder(stateDir)).toHaveLength(1);
    // A mount no record names.
    mkdirSync(join(stateDir, 'stray'));
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', join(stateDir, 'stray')]);
    // A process the ledger names (as slirp4netns or a sandbox's first process would be).
    const recorded = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' });
    started.push(recorded.pid!);
    ledger.recordProcess(recorded.pid, 'a sandbox of the test');
    // A bwrap no record names, whose command line names the state directory.
    mkdirSync(join(stateDir, 'bound'));
    const stray = spawn(
      'bwrap',
      [
        '--die-with-parent',
        '--ro-bind',
        '/',
        '/',
        '--bind',
        join(stateDir, 'bound'),
        '/mnt',
        '--',
        'sleep',
        '1000',
      ],
      { detached: true, stdio: 'ignore' },
    );
    started.push(stray.pid!);
    // A recorded pid now held by another process (its start time differs): never killed.
    const bystander = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' });
    started.push(bystander.pid!);
    ledger.record({ kind: 'process', pid: bystander.pid!, start: '1', what: 'a process long gone' });
    // The runtime directory, with a VM's socket directory in it.
    makeSocketDir(runtimeDir, 'inst_gone');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(alive(stray.pid!)).toBe(true);

    const swept = bcd(['sweep', '--state-dir', stateDir, '--runtime-dir', runtimeDir]);
    expect(await swept.exited, swept.err.join('\n')).toBe(0);
    const report = JSON.parse(swept.out.join(''));
    expect(report).toMatchObject({ vms: 0, sandboxes: 0, processes: 2 });
    expect(report.mounts).toBeGreaterThanOrEqual(1);
    expect(swept.err.join('\n')).toMatch(/^bcd: swept .*2 stray processes/m);
    for (let i = 0; i < 50 && (alive(recorded.pid!) || alive(stray.pid!)); i += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect({
      recorded: alive(recorded.pid!),
      stray: alive(stray.pid!),
      bystander: alive(bystander.pid!),
    }).toEqual({ recorded: false, stray: false, bystander: true });
    expect(mountsUnder(stateDir)).toEqual([]);
    expect(loopsUnder(stateDir)).toEqual([]);
    expect(existsSync(runtimeDir)).toBe(false);
    expect(ledger.entries()).toEqual([]);
    // The volume's data stays for the next start; only what was mounted went.
    expect(existsSync(join(stateDir, 'volumes', 'vol_sweep', 'disk.img'))).toBe(true);

    // Nothing left: a second sweep finds nothing.
    const again = bcd(['sweep', '--state-dir', stateDir, '--runtime-dir', runtimeDir]);
    expect(await again.exited).toBe(0);
    expect(JSON.parse(again.out.join(''))).toMatchObject({
      vms: 0,
      sandboxes: 0,
      processes: 0,
      mounts: 0,
      loopDevices: 0,
      networks: 0,
    });
    spawnSync('kill', ['-9', String(bystander.pid)]);
  }, 120_000);
});

/** Instance links of any daemon on this machine now. */
const instanceLinks = () => readdirSync('/sys/class/net').filter((link) => link.startsWith('bci-'));
const tableListed = () => spawnSync('nft', ['list', 'table', 'ip', 'better_compute'], { encoding: 'utf8' });

// Another daemon's instances on this machine would keep the table: the removal is not this test's.
describe.runIf(root && instanceLinks().length === 0)(
  'the nftables table the daemons of a machine share',
  () => {
    it('is made again for an instance network made after another daemon’s stop removed it, though this daemon made it before', async () => {
      const range = '10.254.254.0/29';
      const hadTable = tableListed().status === 0;
      const net = networkOf('inst_tabletest', range, 0);
      // This daemon wrote the table when it started (it knows it is there from then on)…
      const daemon = new VmNetwork(range);
      await daemon.restore([]);
      // …and another daemon, stopping with its VMs, removed it: no instance link was left.
      expect(await new VmNetwork(range).removeTableIfUnused()).toBe(true);
      expect(tableListed().status).not.toBe(0);
      try {
        // An instance without egress: nothing else would ever bring its rules back.
        await daemon.up(net, false);
        const table = tableListed();
        expect(table.status, table.stderr).toBe(0);
        expect(table.stdout).toContain('iifname "bci-*" drop');
        // With the instance's link there, no other daemon's stop removes the table.
        expect(await new VmNetwork(range).removeTableIfUnused()).toBe(false);
        expect(tableListed().status).toBe(0);
      } finally {
        await daemon.down(net);
      }
      expect(instanceLinks()).toEqual([]);
      if (!hadTable) await new VmNetwork(range).removeTableIfUnused();
    });
  },
);
