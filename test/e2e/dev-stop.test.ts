/**
 * Ctrl-C on `better-compute dev --node` leaves nothing behind (issue 31): the real binary, its real
 * `bcd`, a bwrap sandbox (the template's warm one and one created) and a real instance (a QEMU guest
 * with its network namespace, veth and nftables element). SIGINT to dev stops every process it
 * started and removes every mount, loop device, namespace, rule and socket before dev exits; a
 * restart starts the sandboxes again from their files and tells the control plane the instance
 * stopped. Then `kill -9` of bcd and of dev leaves all of it running, and the next start sweeps it
 * before anything starts again; `kill -9` of dev alone ends bcd's standard input, and bcd stops and
 * removes it all by itself. Nothing is written under /etc: the break-glass SSH files go to
 * dev's state directory.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStart } from '../../packages/daemon/src/runtimes/ledger.js';
import { runtimeDirFor } from '../../packages/daemon/src/runtimes/runtime-dir.js';
import { ensureGuestImage } from '../../packages/better-compute/test/guest-support.js';
import { computeBin, root } from './support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-dev-stop-'));
const stateDir = join(work, 'state');
const bcdState = join(stateDir, 'bcd');
const runtimeDir = runtimeDirFor(bcdState);
const stamp = join(work, 'stamp');
const etcSshBcdBefore = existsSync('/etc/ssh/bcd');
const asRoot = process.getuid?.() === 0;

interface Dev {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  url: string;
}

let dev: Dev | undefined;
let templateId = '';
let imageId = '';
let poolId = '';
let instanceId = '';

/** Stops a dev still running (a step that failed before its own stop): one dev at a time. */
async function stopDev(): Promise<void> {
  if (!dev || dev.child.exitCode !== null || dev.child.signalCode !== null) return;
  dev.child.kill('SIGINT');
  await Promise.race([dev.exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
  if (dev.child.exitCode === null) process.kill(-dev.child.pid!, 'SIGKILL');
}

/** `dev --node` on its own process group, as a terminal runs it, until its node holds a session. */
async function startDev(ready: RegExp[] = []): Promise<Dev> {
  await stopDev();
  const child = spawn(
    process.execPath,
    [computeBin, 'dev', '--node', '--sim', '0', '--port', '0', '--no-console', '--state-dir', stateDir],
    {
      cwd: work,
      // The real HOME: the guest image is in its cache, built once for every suite.
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? work },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const wanted = [/\ntry: BETTER_COMPUTE_URL=\S+/, /bcd: session up as node_/, ...ready];
  const deadline = Date.now() + 180_000;
  while (!wanted.every((pattern) => pattern.test(output))) {
    if (child.exitCode !== null)
      throw new Error(`dev exited ${child.exitCode} before it was ready:\n${output}`);
    if (Date.now() > deadline) throw new Error(`dev was not ready in time:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const url = /better-compute dev: (http:\/\/127\.0\.0\.1:\d+)\/api\/compute\n/.exec(output)![1]!;
  return { child, output: () => output, exited, url };
}

async function call<T = any>(method: string, body: Record<string, unknown>, as = 'acmeAdmin'): Promise<T> {
  const accounts = JSON.parse(readFileSync(join(stateDir, 'dev.json'), 'utf8'));
  const response = await fetch(`${dev!.url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accounts[as].apiKey}` },
    body: JSON.stringify({ tenantId: as === 'rootAdmin' ? 'root' : 'acme', ...body }),
  });
  const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`${what}: not in time${last ? ` (${(last as Error).message})` : ''}\n${dev?.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const alive = (pid: number) => processStart(pid) !== null;
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** Every process dev's node has now: its bcd, each sandbox's, each VM's QEMU. */
function nodeProcesses(): number[] {
  const pids = [readJson(join(bcdState, 'status.json')).pid as number];
  for (const id of sandboxDirs()) {
    if (!existsSync(join(bcdState, 'sandboxes', id, 'run.json'))) continue;
    const run = readJson(join(bcdState, 'sandboxes', id, 'run.json'));
    pids.push(...[run.pid, run.monitorPid, run.netPid].filter(Boolean));
  }
  for (const id of existsSync(join(bcdState, 'instances')) ? readdirSync(join(bcdState, 'instances')) : [])
    if (existsSync(join(bcdState, 'instances', id, 'qemu.pid')))
      pids.push(Number(readFileSync(join(bcdState, 'instances', id, 'qemu.pid'), 'utf8').trim()));
  return pids.filter((pid) => alive(pid));
}

/** The sandboxes the node has files of. */
function sandboxDirs(): string[] {
  const dir = join(bcdState, 'sandboxes');
  return existsSync(dir) ? readdirSync(dir).filter((id) => id.startsWith('sbx_')) : [];
}

/** The instances' networks as their spec.json records them. */
function instanceNetworks(): { name: string; address: string }[] {
  const dir = join(bcdState, 'instances');
  return (existsSync(dir) ? readdirSync(dir) : [])
    .filter((id) => id.startsWith('inst_'))
    .map((id) => readJson(join(dir, id, 'spec.json')).network);
}

const mountsUnder = (dirs: string[]) =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => dirs.some((dir) => point.startsWith(`${dir}/`)));

const loopsUnder = (dir: string) =>
  (
    JSON.parse(
      execFileSync('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE'], { encoding: 'utf8' }) ||
        '{"loopdevices":[]}',
    ) as { loopdevices: { name: string; 'back-file': string | null }[] }
  ).loopdevices.filter((device) => device['back-file']?.startsWith(`${dir}/`));

/** Processes whose process group is `pgid`, or whose command line names the state directory. */
function leftoverProcesses(pgid: number): string[] {
  const found: string[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ');
      if (Number(fields[2]) === pgid || args.includes(stateDir)) found.push(`${name} ${args.slice(0, 200)}`);
    } catch {
      // Gone while it was read.
    }
  }
  return found;
}

/** What a stopped dev must not have left: checked against what it had while it ran. */
function expectNothingLeft(pgid: number, hadPids: number[], hadNets: { name: string; address: string }[]) {
  expect(leftoverProcesses(pgid)).toEqual([]);
  expect(hadPids.filter((pid) => alive(pid))).toEqual([]);
  expect(mountsUnder([stateDir, runtimeDir])).toEqual([]);
  expect(loopsUnder(stateDir)).toEqual([]);
  expect(existsSync(runtimeDir)).toBe(false);
  const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const net of hadNets) {
    expect(namespaces).not.toContain(net.name);
    expect(existsSync(`/sys/class/net/${net.name}`)).toBe(false);
  }
  const set = spawnSync('nft', ['list', 'set', 'ip', 'better_compute', 'egress'], { encoding: 'utf8' });
  for (const net of hadNets)
    expect(set.stdout).not.toMatch(new RegExp(`\\b${net.address.replaceAll('.', '\\.')}\\b`));
  // The nftables table is shared by every daemon of the machine: gone unless another daemon's
  // instance network (a `bci-` link) still needs it.
  if (!readdirSync('/sys/class/net').some((link) => link.startsWith('bci-')))
    expect(execFileSync('nft', ['list', 'tables'], { encoding: 'utf8' })).not.toContain('better_compute');
  expect(JSON.parse(readFileSync(join(bcdState, 'made.json'), 'utf8'))).toEqual({ made: [] });
}

/** SIGINT, as Ctrl-C sends it, and dev's own exit once everything it started has stopped. */
async function interrupt(): Promise<number | null> {
  const running = dev!;
  const sent = Date.now();
  running.child.kill('SIGINT');
  const code = await Promise.race([
    running.exited,
    new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 120_000)),
  ]);
  if (code === 'late') throw new Error(`dev did not exit within 120 s of SIGINT:\n${running.output()}`);
  console.log(`dev --node: SIGINT to exit, everything stopped and removed, in ${Date.now() - sent} ms`);
  expect(running.output()).toContain('this machine: bcd stopped; nothing of it is left running');
  return code;
}

beforeAll(async () => {
  await ensureGuestImage();
  writeFileSync(stamp, '');
  // The file's time is the moment the suite begins: /etc is checked for anything newer.
  await new Promise((resolve) => setTimeout(resolve, 1100));
}, 1_800_000);

afterAll(async () => {
  await stopDev();
  // Whatever a failed step left goes the way the product removes it.
  const bcdBin = join(root, 'packages', 'daemon', 'bin', 'bcd.cjs');
  spawnSync(process.execPath, [bcdBin, 'sweep', '--state-dir', bcdState], { stdio: 'ignore' });
  rmSync(work, { recursive: true, force: true });
}, 120_000);

describe.runIf(asRoot)('dev --node stops everything it started', () => {
  it('SIGINT stops bcd, the sandboxes and the VM, and removes their mounts, loop devices, namespace, rule and sockets before dev exits', async () => {
    dev = await startDev([/sandbox template (sbxt_\w+)/, /image (img_\w+)/]);
    templateId = /sandbox template (sbxt_\w+)/.exec(dev.output())![1]!;
    imageId = /image (img_\w+)/.exec(dev.output())![1]!;
    poolId = /in pool this-machine, (pool_\w+)/.exec(dev.output())![1]!;
    // The template's warm sandbox, then an instance beside it: this machine's two vCPUs are theirs.
    await until('the warm sandbox to run', async () => nodeProcesses().length === 1 + 2);
    const flavors = await call<{ items: { id: string; name: string }[] }>('flavors.list', { poolId });
    const instance = await call('instances.create', {
      poolId,
      flavorId: flavors.items.find((flavor) => flavor.name === 'small')!.id,
      imageId,
      name: 'dev-stop',
    });
    instanceId = instance.id;
    await until(
      'the instance to run',
      async () => (await call('instances.get', { instanceId })).state === 'running',
      400_000,
    );
    // A sandbox created now claims the warm one. No warm one follows: the pool's minimum goes to 0,
    // so the vCPU it would hold stays free for the instance's next start.
    const sandbox = await call('sandboxes.create', { templateId, waitSeconds: 30 });
    expect(sandbox.state).toBe('running');
    const template = await call('sandboxTemplates.get', { templateId });
    await call('sandboxTemplates.update', { templateId, ifVersion: template.version, warmMin: 0 });
    expect(sandboxDirs()).toEqual([sandbox.id]);
    await until('the VM and the sandbox to run', async () => nodeProcesses().length === 1 + 2 + 1);
    const pids = nodeProcesses();
    const nets = instanceNetworks();
    expect(nets).toHaveLength(1);
    expect(mountsUnder([stateDir]).length).toBeGreaterThanOrEqual(2);
    expect(loopsUnder(stateDir).length).toBeGreaterThanOrEqual(1);
    expect(existsSync(`/sys/class/net/${nets[0]!.name}`)).toBe(true);
    expect(readdirSync(runtimeDir)).toHaveLength(1);

    const pgid = dev.child.pid!;
    expect(await interrupt()).toBe(0);
    expectNothingLeft(pgid, pids, nets);
  }, 900_000);

  it('a restart starts the sandboxes again from their files, and the instance reads stopped, with why', async () => {
    dev = await startDev([/sandbox sbx_\w+ started again from its files/]);
    const instance = await until('the instance’s stop to be told', async () => {
      const got = await call('instances.get', { instanceId });
      return got.state === 'stopped' ? got : undefined;
    });
    expect(instance.reason ?? '').not.toMatch(/crashed|killed/);
    await until('the sandbox to run again', async () => nodeProcesses().length === 1 + 2);
    expect(sandboxDirs()).toHaveLength(1);
  }, 300_000);

  it('kill -9 of bcd and dev leaves their workloads; the next start sweeps them before anything starts again', async () => {
    // A VM too, so a killed run leaves a QEMU, its namespace and its rule.
    await call('instances.start', { instanceId });
    await until(
      'the instance to run again',
      async () => (await call('instances.get', { instanceId })).state === 'running',
      400_000,
    );
    const pids = nodeProcesses();
    const nets = instanceNetworks();
    const bcdPid = readJson(join(bcdState, 'status.json')).pid as number;
    process.kill(bcdPid, 'SIGKILL');
    process.kill(-dev!.child.pid!, 'SIGKILL');
    await dev!.exited;
    // Nothing stopped them: the sandbox, the VM, their mounts and the VM's network remain.
    const left = pids.filter((pid) => pid !== bcdPid && alive(pid));
    expect(left).toHaveLength(pids.length - 1);
    expect(mountsUnder([stateDir]).length).toBeGreaterThanOrEqual(2);
    expect(existsSync(`/sys/class/net/${nets[0]!.name}`)).toBe(true);

    dev = await startDev([/bcd: swept 1 VM, 1 sandbox/]);
    expect(left.filter((pid) => alive(pid))).toEqual([]);
    const instance = await until('the swept VM’s stop to be told', async () => {
      const got = await call('instances.get', { instanceId });
      return got.state === 'stopped' ? got : undefined;
    });
    expect(instance.state).toBe('stopped');
    await until('the sandbox to run again', async () => nodeProcesses().length === 1 + 2);
    const now = nodeProcesses();
    const pgid = dev.child.pid!;
    expect(await interrupt()).toBe(0);
    expectNothingLeft(pgid, [...pids, ...now], nets);
    // Nothing of it was written under /etc: the break-glass SSH files are in dev's state directory.
    const newer = execFileSync('find', ['/etc', '-newer', stamp], { encoding: 'utf8' })
      .split('\n')
      .filter((path) => /bcd|better-compute/.test(path));
    expect(newer).toEqual([]);
    expect(existsSync('/etc/ssh/bcd')).toBe(etcSshBcdBefore);
  }, 900_000);

  it('kill -9 of dev alone: its bcd sees its standard input end, stops its sandbox and removes what it made', async () => {
    dev = await startDev([/sandbox sbx_\w+ started again from its files/]);
    await until('the sandbox to run again', async () => nodeProcesses().length === 1 + 2);
    const pids = nodeProcesses();
    const bcdPid = readJson(join(bcdState, 'status.json')).pid as number;
    const pgid = dev.child.pid!;
    process.kill(-pgid, 'SIGKILL');
    await dev.exited;
    await until('bcd to stop by itself', async () => !alive(bcdPid), 60_000);
    expectNothingLeft(pgid, pids, instanceNetworks());
  }, 300_000);
});
