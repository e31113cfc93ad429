/**
 * The control plane's bare metal end to end with real parts: `better-compute serve` as its own
 * process, a real `bcd` joined with a site token (site mode), and a real BMC: OpenIPMI's ipmi_sim
 * in front of a QEMU machine (TCG, a 64 MiB disk) through QEMU's ipmi-bmc-extern device, as the metal
 * lab suite starts it (metal/lab-machine.ts). The machine is enrolled with the CLI binary (the BMC
 * password from --bmc-password-file; on argv it is refused and not echoed), managed (the site
 * agent asks the BMC), provided, powered on (QEMU starts), read, powered off (QEMU ends) and
 * retired; the password's bytes are then looked for in every event, audit row, command, workflow,
 * answer, log and file of the server and the daemon, and found in none. The agent runs the site's
 * provisioning network (`bcd run --pxe-dir`, the machine's tap its uplink): powered on through IPMI
 * to boot from the network before it is enrolled, the machine is discovered (unknown, with its
 * UUID); enrolled by its UUID only, it is a candidate; `metal confirm-mac` binds its MAC, and the
 * agent's network then answers the MAC with its boot entry (metal.boot-entries). Inspect and provide
 * boot the deploy ramdisk from that network: it reports the hardware QEMU was started with, then
 * erases the metadata of the machine's disk, which the suite reads back from the disk file.
 *
 * Runs as root in the guest project, with ipmitool, ipmi_sim and QEMU from the host group `guest`
 * of scripts/host-tools.mjs (the project's set-up installs them; missing, the suite fails, never
 * skips).
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../../better-compute/src/index.js';
import { generatedCommandSigner } from '../../better-compute/src/gateway/signer.js';
import {
  bcd,
  bcdJoin,
  daemonConnected,
  freePort,
  type Proc,
  root,
  start,
  startServer,
  until,
} from './daemon-support.js';
import { createIpmiDriver } from '../src/metal/index.js';
import { LabMachine } from './metal/lab-machine.js';
import {
  certificateAuthority,
  driverBackend,
  serverCertificate,
  startRedfishEmulator,
} from './metal/redfish-emulator.js';

const SECRET = `metal-site-suite-${randomBytes(8).toString('hex')}`;
const BMC_USER = 'admin';
/** The BMC password: 16 bytes (IPMI allows 20), found nowhere but the BMC's own configuration. */
const BMC_PASSWORD = `pw-${randomBytes(6).toString('hex')}x`;
const UUID = '6a1f0c1a-5b2d-4c8e-9f10-2a3b4c5d6e70';
const MAC = `52:54:00:${randomBytes(3).toString('hex').match(/../g)!.join(':')}`;
const cliBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
const scratch = mkdtempSync(join(tmpdir(), 'bc-metal-site-'));
const stateDir = join(scratch, 'state');
/** The machine's disk: 64 MiB, a GPT with one partition from 1 MiB, and a tenant's bytes in it. */
const DISK = join(scratch, 'disk.raw');
const MIB = 1024 * 1024;
const DISK_BYTES = 64 * MIB;
const TENANT_BYTES = Buffer.from('a previous tenant was here\n');
// One tap per checkout, so a killed run's is removed by the next (and two checkouts never meet).
const TAP = `bcms-${createHash('sha256').update(root).digest('hex').slice(0, 8)}`;
/** The agent's provisioning network directory: per checkout, readable by others (dnsmasq runs as nobody). */
const PXE_DIR = join(
  tmpdir(),
  `bc-metal-site-pxe-${createHash('sha256').update(root).digest('hex').slice(0, 8)}`,
);

let database: TestDatabase;
let compute: ComputeInstance;
let rootKey: string;
let server: Proc | undefined;
let daemon: Proc | undefined;
let machine: LabMachine | undefined;
let url: string;
let machineId: string;
let siteId: string;
let ramdiskDir: string;
/** Every answer the suite was given, to look for the password in. */
const answers: unknown[] = [];

async function api<T = any>(method: string, body: Record<string, unknown>): Promise<T> {
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${rootKey}` },
      body: JSON.stringify({ tenantId: 'root', ...body }),
    }),
  );
  const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  answers.push(answer);
  if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

/** The CLI binary against the running server; its exit code and output. */
async function cli(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const run = start(cliBin, [...args, '--url', url, '--format', 'compact'], {
    BETTER_COMPUTE_TOKEN: rootKey,
    BETTER_COMPUTE_TENANT: 'root',
    HOME: scratch,
    BETTER_IAM_HOME: join(scratch, 'iam'),
  });
  const code = await run.exited;
  const result = { code, out: run.out.join('\n'), err: run.err.join('\n') };
  answers.push(result);
  return result;
}

function writeAt(file: string, bytes: Buffer, offset: number): void {
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, bytes, 0, bytes.length, offset);
  } finally {
    closeSync(fd);
  }
}

/** `length` bytes of `file` from `offset`. */
function readAt(file: string, offset: number, length: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const bytes = Buffer.alloc(length);
    readSync(fd, bytes, 0, length, offset);
    return bytes;
  } finally {
    closeSync(fd);
  }
}

const allZero = (bytes: Buffer) => bytes.every((byte) => byte === 0);

/** `waiting`, its failure told with what the lab machine's scripts and BMC printed. */
async function watched<T>(waiting: Promise<T>): Promise<T> {
  try {
    return await waiting;
  } catch (error) {
    const agent = daemon ? [...daemon.out, ...daemon.err].join('\n').slice(-1500) : '(not started)';
    throw new Error(`${(error as Error).message}\n${machine?.diagnostics() ?? ''}\nthe agent:\n${agent}`, {
      cause: error,
    });
  }
}

/** Waits until the machine's row satisfies `done`. */
const settles = (what: string, done: (m: any) => boolean, timeoutMs = 30_000) =>
  watched(
    until(
      what,
      async () => {
        const m = await api('metal.get', { machineId });
        if (m.lastError && m.targetState === null && !done(m)) throw new Error(`${what}: ${m.lastError}`);
        return done(m) ? m : undefined;
      },
      timeoutMs,
    ),
  );

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the metal site suite runs as root (the guest project does)');
  for (const tool of ['ipmitool', 'ipmi_sim', 'qemu-system-x86_64'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(`${tool} is missing: run node scripts/host-tools.mjs guest`);
  database = await createTestDatabase('postgres');
  compute = await betterCompute(
    { database, trustedOrigins: [], rateLimit: false, secret: SECRET },
    { log: () => {} },
  );
  await compute.migrate();
  rootKey = (await compute.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const keyFile = join(scratch, 'command-root.pem');
  writeFileSync(keyFile, generatedCommandSigner().privateKeyPem, { mode: 0o600 });
  server = await startServer(database.url!, port, keyFile, { BETTER_COMPUTE_SECRET: SECRET });

  // The machine: its NIC on a tap of its own (no provisioning network: it is powered, not booted).
  spawnSync('ip', ['link', 'del', TAP], { stdio: 'ignore' });
  const tap = spawnSync('ip', ['tuntap', 'add', 'dev', TAP, 'mode', 'tap'], { encoding: 'utf8' });
  if (tap.status !== 0) throw new Error(`ip tuntap add ${TAP} failed: ${tap.stderr}`);
  writeFileSync(DISK, Buffer.alloc(0));
  truncateSync(DISK, DISK_BYTES);
  const partitioned = spawnSync('sfdisk', ['--quiet', DISK], { input: 'label: gpt\nstart=2048, type=L\n' });
  if (partitioned.status !== 0) throw new Error(`sfdisk failed: ${partitioned.stderr}`);
  writeAt(DISK, TENANT_BYTES, 1 * MIB);
  writeAt(DISK, TENANT_BYTES, 32 * MIB);
  machine = await LabMachine.start({
    dir: join(scratch, 'machine'),
    tap: TAP,
    mac: MAC,
    uuid: UUID,
    bmcUser: BMC_USER,
    bmcPassword: BMC_PASSWORD,
    cpus: 2,
    memoryMiB: 512,
    disk: DISK,
  });
  // The deploy ramdisk the agent boots machines into (cached outside the repository).
  const built = spawnSync(join(root, 'scripts', 'build-deploy-ramdisk.sh'), [], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`build-deploy-ramdisk.sh failed:\n${built.stderr}`);
  ramdiskDir = built.stdout.trim().split('\n').pop()!;
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  await machine?.stop();
  spawnSync('ip', ['link', 'del', TAP], { stdio: 'ignore' });
  server?.child.kill('SIGTERM');
  await server?.exited;
  await compute?.close();
  await database?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a bare-metal machine through its site agent', () => {
  it('bcd joined with a site token is the site’s agent', async () => {
    const site = await api('sites.create', { name: 'lab-site' });
    const pool = await api('pools.create', { siteId: site.id, name: 'lab-agents', class: 'vps' });
    const minted = await cli([
      'site-tokens',
      'create',
      '--pool',
      pool.id,
      '--pre-approved',
      '--out',
      join(scratch, 'site.token'),
    ]);
    expect(minted.code).toBe(0);
    expect(statSync(join(scratch, 'site.token')).mode & 0o777).toBe(0o600);
    const joined = await bcdJoin(
      url,
      readFileSync(join(scratch, 'site.token'), 'utf8').trim(),
      scratch,
      stateDir,
    );
    expect(joined.err.join('\n')).toContain('the agent of its pool’s site');
    expect(JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).role).toBe('site-agent');
    daemon = bcd([
      'run',
      '--state-dir',
      stateDir,
      '--scripts-dir',
      scratch,
      '--pxe-dir',
      PXE_DIR,
      '--pxe-uplink',
      TAP,
      '--ramdisk-dir',
      ramdiskDir,
    ]);
    await daemonConnected(stateDir);
    const nodeId = JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')).nodeId;
    const node = await until('the agent to be ready', async () => {
      const n = await api('nodes.get', { nodeId });
      return n.state === 'ready' ? n : undefined;
    });
    expect(node.role).toBe('site-agent');
    expect(node.taints.map((t: any) => t.key)).toEqual(['better-compute.io/site-agent']);
    siteId = site.id;
  });

  it('a machine PXE-booting on the agent’s network is discovered, and nothing binds it', async () => {
    const ipmi = createIpmiDriver({
      host: '127.0.0.1',
      port: machine!.ipmiPort,
      credentials: { username: BMC_USER, password: BMC_PASSWORD },
    });
    await ipmi.setBootDevice('pxe');
    await ipmi.power('on');
    try {
      const row = await watched(
        until(
          'the machine in metal discovered',
          async () => (await api('metal.discovered', { siteId })).items.find((r: any) => r.mac === MAC),
          90_000,
        ),
      );
      expect(row).toMatchObject({ mac: MAC, uuid: UUID, kind: 'unknown', machineId: null });
      expect((await api('metal.list', {})).items).toEqual([]);
    } finally {
      await ipmi.power('off');
      await machine!.waitFor('QEMU ends', () => machine!.qemuPid() === null, 10_000);
      await ipmi.setBootDevice('disk');
    }
  }, 120_000);

  it('enroll takes the BMC password from a file only; on argv it is refused and not echoed', async () => {
    const base = [
      'metal',
      'enroll',
      'lab-1',
      '--site',
      siteId,
      '--bmc-driver',
      'ipmi',
      '--bmc-address',
      '127.0.0.1',
      '--bmc-port',
      String(machine!.ipmiPort),
      '--bmc-user',
      BMC_USER,
      '--product-uuid',
      UUID,
    ];
    const onArgv = await cli([...base, '--bmc-password', BMC_PASSWORD]);
    expect(onArgv.code).toBe(2);
    // The flag is unknown (there is none to take a password), and the parser stops before its value.
    expect(onArgv.err).toContain(
      'INVALID_ARGUMENT: unknown flag --bmc-password for "metal enroll"; did you mean --bmc-password-file?',
    );
    expect(onArgv.out + onArgv.err).not.toContain(BMC_PASSWORD);
    expect((await api('metal.list', {})).items).toEqual([]);
    const passwordFile = join(scratch, 'bmc.pass');
    writeFileSync(passwordFile, `${BMC_PASSWORD}\n`, { mode: 0o600 });
    const enrolled = await cli([...base, '--bmc-password-file', passwordFile]);
    expect(enrolled.code).toBe(0);
    const m = JSON.parse(enrolled.out);
    expect(m).toMatchObject({ provisionState: 'enroll', macs: [], bmc: { passwordSet: true } });
    machineId = m.id;
    // Enrolled by its UUID only: the MAC the agent saw under that UUID is its candidate.
    const discovered = async () =>
      (await api('metal.discovered', { siteId })).items.find((r: any) => r.mac === MAC);
    expect(await discovered()).toMatchObject({ kind: 'candidate', machineId });
    const confirmed = await cli(['metal', 'confirm-mac', '--machine', machineId, '--mac', MAC.toUpperCase()]);
    expect(confirmed.code).toBe(0);
    expect(JSON.parse(confirmed.out).macs).toEqual([MAC]);
    expect(await discovered()).toMatchObject({ kind: 'enrolled', machineId });
    // The agent answers the bound MAC now: its provisioning network has the MAC's boot script.
    const script = join(PXE_DIR, 'http', 'nodes', `${MAC.replaceAll(':', '-')}.ipxe`);
    await until(
      'the agent to write the MAC’s boot entry',
      async () => existsSync(script) || undefined,
      30_000,
    );
    expect(readFileSync(script, 'utf8')).toContain('sanboot --no-describe --drive 0x80');
  });

  it('manage asks the real BMC through the agent', async () => {
    const verifying = await cli(['metal', 'manage', machineId, '--reason', 'lab bring-up']);
    expect(verifying.code).toBe(0);
    expect(JSON.parse(verifying.out).provisionState).toBe('verifying');
    const managed = await settles('manageable', (m) => m.provisionState === 'manageable');
    expect(managed.powerState).toBe('off');
    expect(machine!.qemuPid()).toBeNull();
  });

  it('inspect boots the deploy ramdisk, which reports the real hardware', async () => {
    const script = join(PXE_DIR, 'http', 'nodes', `${MAC.replaceAll(':', '-')}.ipxe`);
    const inspecting = await cli(['metal', 'inspect', machineId, '--reason', 'lab inventory']);
    expect(inspecting.code).toBe(0);
    expect(JSON.parse(inspecting.out)).toMatchObject({
      provisionState: 'inspecting',
      targetState: 'manageable',
    });
    // The agent's entry for the MAC boots its ramdisk, with a report token of the agent's own.
    const entry = await until(
      'the agent to boot the ramdisk for the MAC',
      async () => {
        const text = existsSync(script) ? readFileSync(script, 'utf8') : '';
        return text.includes('bc.purpose=inspect') ? text : undefined;
      },
      30_000,
    );
    const token = /bc\.token=([0-9a-f]{32})/.exec(entry)?.[1];
    expect(token).toBeDefined();
    const inspected = await settles(
      'inspected and manageable again',
      (m) => m.provisionState === 'manageable' && m.inspectedAt !== null,
      240_000,
    );
    // What QEMU was started with (-smp 2 -m 512 -uuid UUID, one e1000 on the MAC), as the ramdisk found it.
    expect(inspected.inventory).toMatchObject({
      systemUuid: UUID,
      cpu: { count: 2 },
      memory: { physicalMiB: 512 },
      disks: [{ name: 'vda', sizeBytes: DISK_BYTES }],
      nics: [{ mac: MAC }],
    });
    expect(inspected.powerState).toBe('off');
    await machine!.waitFor('QEMU ends', () => machine!.qemuPid() === null, 10_000);
    expect(readFileSync(machine!.consolePath, 'utf8')).toContain('bc-agent: inspection reported');
    const events = await api('events.list', { type: 'metal.inspected', limit: 100 });
    expect(events.items.find((e: any) => e.subject?.id === machineId)?.data).toMatchObject({
      cpus: 2,
      memoryMiB: 512,
      mac: MAC,
    });
    // Out of inspection its MAC boots from the disk again, and the token is nowhere on the control plane.
    await until(
      'the entry back to the disk',
      async () => readFileSync(script, 'utf8').includes('sanboot') || undefined,
      30_000,
    );
    const holders = await sql<{ n: number }>`
      select (select count(*) from compute.commands where payload::text like ${`%${token}%`})
           + (select count(*) from compute.events where data::text like ${`%${token}%`}) as n`.execute(
      database.db as never,
    );
    expect(Number(holders.rows[0]!.n)).toBe(0);
  }, 300_000);

  it('provide boots the ramdisk to erase the disk’s metadata, then the machine is available', async () => {
    // Before: the protective MBR's signature, the GPT's header, and the tenant's bytes in the partition.
    expect(readAt(DISK, 510, 2)).toEqual(Buffer.from([0x55, 0xaa]));
    expect(readAt(DISK, 512, 8).toString()).toBe('EFI PART');
    expect(readAt(DISK, MIB, TENANT_BYTES.length)).toEqual(TENANT_BYTES);
    const cleaning = await cli(['metal', 'provide', machineId, '--reason', 'lab clean']);
    expect(cleaning.code).toBe(0);
    expect(JSON.parse(cleaning.out)).toMatchObject({ provisionState: 'cleaning', targetState: 'available' });
    const available = await settles('available', (m) => m.provisionState === 'available', 240_000);
    // One partition: its first MiB, and the disk's first and last MiB (the GPT and its backup).
    expect(available.cleaning).toEqual({
      systemUuid: UUID,
      disks: [{ name: 'vda', sizeBytes: DISK_BYTES, partitions: 1, erasedBytes: 3 * MIB }],
      failed: null,
    });
    expect(available.powerState).toBe('off');
    await machine!.waitFor('QEMU ends', () => machine!.qemuPid() === null, 10_000);
    expect(readFileSync(machine!.consolePath, 'utf8')).toContain('bc-agent: cleaning reported');
    // The partition table, its backup and the file system's start are zeroes on the disk itself.
    expect(allZero(readAt(DISK, 0, MIB))).toBe(true);
    expect(allZero(readAt(DISK, MIB, MIB))).toBe(true);
    expect(allZero(readAt(DISK, DISK_BYTES - MIB, MIB))).toBe(true);
    // A metadata erase leaves the data between (docs/decisions/metal-cleaning.md).
    expect(readAt(DISK, 32 * MIB, TENANT_BYTES.length)).toEqual(TENANT_BYTES);
    const events = await api('events.list', { type: 'metal.cleaned', limit: 100 });
    expect(events.items.find((e: any) => e.subject?.id === machineId)?.data).toMatchObject({
      mac: MAC,
      disks: 1,
      erasedBytes: 3 * MIB,
    });
  }, 300_000);

  it('power on starts the machine, status reads it, power off ends it', async () => {
    await api('metal.power', { machineId, action: 'on' });
    await settles('powered on', (m) => m.powerState === 'on' && m.targetState === null && !m.lastError);
    expect(
      await machine!.waitFor('QEMU runs', () => machine!.qemuPid() !== null, 10_000),
    ).toBeGreaterThanOrEqual(0);
    const status = await cli(['metal', 'power', 'status', machineId]);
    expect(status.code).toBe(0);
    const wf = JSON.parse(status.out).workflowId;
    await until(
      'the status workflow',
      async () => (await api('workflows.get', { workflowId: wf })).state === 'succeeded',
    );
    expect((await api('metal.get', { machineId })).powerState).toBe('on');
    await api('metal.power', { machineId, action: 'off' });
    await settles('powered off', (m) => m.powerState === 'off');
    await machine!.waitFor('QEMU ends', () => machine!.qemuPid() === null, 10_000);
    expect(readFileSync(machine!.chassisLog, 'utf8')).toMatch(/set power 1[\s\S]*set power 0/);
  });

  it('retire ends it; a wrong transition is INVALID_STATE naming both states', async () => {
    const retired = await cli(['metal', 'retire', machineId, '--reason', 'lab done']);
    expect(retired.code).toBe(0);
    expect(JSON.parse(retired.out).provisionState).toBe('retired');
    const refused = await cli(['metal', 'provide', machineId]);
    expect(refused.code).not.toBe(0);
    expect(refused.err).toContain(`machine ${machineId} is retired; provide needs manageable`);
  });

  it('a Redfish BMC over HTTPS with its certificate pinned: manage, power on and off', async () => {
    // The suite's Redfish BMC in front of the same machine (its calls become IPMI calls to ipmi_sim).
    const issued = await serverCertificate(await certificateAuthority());
    const emulator = await startRedfishEmulator({
      username: BMC_USER,
      password: BMC_PASSWORD,
      backend: driverBackend(
        createIpmiDriver({
          host: '127.0.0.1',
          port: machine!.ipmiPort,
          credentials: { username: BMC_USER, password: BMC_PASSWORD },
        }),
      ),
      tls: issued,
    });
    try {
      const redfish = await api('metal.enroll', {
        siteId,
        name: 'lab-1-redfish',
        bmcDriver: 'redfish',
        bmcAddress: '127.0.0.1',
        bmcPort: Number(new URL(emulator.url).port),
        bmcUser: BMC_USER,
        bmcPassword: BMC_PASSWORD,
        bmcTlsFingerprint: issued.fingerprint,
        productUuid: '6a1f0c1a-5b2d-4c8e-9f10-2a3b4c5d6e71',
      });
      const previous = machineId;
      machineId = redfish.id;
      await api('metal.manage', { machineId });
      expect(
        (await settles('manageable over redfish', (m) => m.provisionState === 'manageable')).powerState,
      ).toBe('off');
      await api('metal.power', { machineId, action: 'on' });
      await settles('on over redfish', (m) => m.powerState === 'on' && !m.lastError);
      await machine!.waitFor('QEMU runs', () => machine!.qemuPid() !== null, 10_000);
      await api('metal.power', { machineId, action: 'off' });
      await settles('off over redfish', (m) => m.powerState === 'off');
      await machine!.waitFor('QEMU ends', () => machine!.qemuPid() === null, 10_000);
      expect(emulator.requests.some((r) => r.path.endsWith('/Actions/ComputerSystem.Reset'))).toBe(true);
      machineId = previous;
    } finally {
      await emulator.close();
    }
  });

  it('the password is in no event, audit row, command, workflow, answer, log or daemon file', async () => {
    const db = database.db;
    const rows = JSON.stringify([
      (await sql`select * from compute.events`.execute(db)).rows,
      (await sql`select * from compute.audit_events`.execute(db)).rows,
      (await sql`select * from compute.commands`.execute(db)).rows,
      (await sql`select * from compute.workflows`.execute(db)).rows,
      (await sql`select * from compute.metal_machines`.execute(db)).rows,
    ]);
    expect(rows).toContain(machineId);
    expect(rows).not.toContain(BMC_PASSWORD);
    const bmcCommands = (
      await sql<{ state: string }>`select state from compute.commands where kind = 'metal.bmc'`.execute(db)
    ).rows;
    expect(bmcCommands.length).toBeGreaterThanOrEqual(5);
    expect(bmcCommands.every((c) => c.state === 'succeeded')).toBe(true);
    expect(JSON.stringify(answers)).not.toContain(BMC_PASSWORD);
    const logs = [...server!.out, ...server!.err, ...daemon!.out, ...daemon!.err].join('\n');
    expect(logs).toContain('metal.bmc');
    expect(logs).not.toContain(BMC_PASSWORD);
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
      );
    // The daemon's state (its ledger of results among them); the BMC's own files hold it, as a BMC does.
    for (const file of files(stateDir)) expect(readFileSync(file, 'latin1')).not.toContain(BMC_PASSWORD);
  });
});
