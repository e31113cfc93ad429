/**
 * What the provisioning network service makes on the machine, and how it is found again and
 * removed: a network namespace holding the service's end of a veth pair and its two processes
 * (dnsmasq, busybox httpd), a bridge joining the other end to the provisioning network's interfaces,
 * and the service's directory.
 *
 * The names come from a hash of the directory, so a service started again over the same directory
 * finds what a killed run left, as the daemon's runtime directory does (runtimes/runtime-dir.ts). A
 * record (`private/record.json`) names each thing before it is made, processes with their start time
 * (runtimes/ledger.ts); a sweep stops what the record names, then what the kernel shows under those
 * names (links, the namespace, dnsmasq and busybox processes whose command line names the
 * directory), and removes the directory's files.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { processStart, sameProcess } from '../runtimes/ledger.js';

/** The links and namespace of the service over `dir`; each name within a link name's 15 characters. */
export interface ProvisioningNames {
  namespace: string;
  bridge: string;
  /** The veth end on the bridge (host side). */
  hostVeth: string;
  /** The veth end inside the namespace, where dnsmasq and the web server listen. */
  serviceVeth: string;
}

export function namesOf(dir: string): ProvisioningNames {
  const key = createHash('sha256').update(resolve(dir)).digest('hex').slice(0, 8);
  return {
    namespace: `bcp-${key}`,
    bridge: `bcpb-${key}`,
    hostVeth: `bcpv-${key}`,
    serviceVeth: `bcpn-${key}`,
  };
}

export interface ProvisioningRecord {
  names: ProvisioningNames;
  processes: { pid: number; start: string; what: string }[];
}

export const privateDir = (dir: string) => join(dir, 'private');
const recordPath = (dir: string) => join(privateDir(dir), 'record.json');

function readRecord(dir: string): ProvisioningRecord | null {
  try {
    const record = JSON.parse(readFileSync(recordPath(dir), 'utf8')) as ProvisioningRecord;
    if (!record || typeof record !== 'object' || !Array.isArray(record.processes)) return null;
    // Only names this service makes: a record is never a way to remove another link.
    const names = record.names as Partial<ProvisioningNames> | undefined;
    const ours =
      names &&
      /^bcp-[0-9a-f]{8}$/.test(names.namespace ?? '') &&
      /^bcpb-[0-9a-f]{8}$/.test(names.bridge ?? '') &&
      /^bcpv-[0-9a-f]{8}$/.test(names.hostVeth ?? '') &&
      /^bcpn-[0-9a-f]{8}$/.test(names.serviceVeth ?? '');
    const processes = record.processes.filter(
      (p) => Number.isInteger(p?.pid) && p.pid > 1 && typeof p.start === 'string',
    );
    return { names: ours ? (names as ProvisioningNames) : namesOf(dir), processes };
  } catch {
    return null;
  }
}

export function writeRecord(dir: string, record: ProvisioningRecord): void {
  const temporary = `${recordPath(dir)}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(record, null, 1)}\n`, { mode: 0o600 });
  renameSync(temporary, recordPath(dir));
}

/** Notes a process just started, with its start time (a reused pid never matches it). */
export function recordProcess(
  dir: string,
  record: ProvisioningRecord,
  pid: number | undefined,
  what: string,
): void {
  if (!pid) return;
  const start = processStart(pid);
  if (start) record.processes.push({ pid, start, what });
  writeRecord(dir, record);
}

/** The search path for the host's tools: the caller's, then where iproute2 and dnsmasq live. */
export const TOOL_PATH = `${process.env.PATH ?? ''}:/usr/sbin:/usr/bin:/sbin:/bin`.replace(/^:/, '');

/** Runs `ip` (or another host tool) without a shell; fails with its stderr. */
function run(command: string, args: string[], timeoutMs = 15_000): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      command,
      args,
      { timeout: timeoutMs, env: { PATH: TOOL_PATH, LANG: 'C' } },
      (error, stdout, stderr) => {
        if (error) {
          const why = String(stderr).trim().slice(-500) || error.message;
          reject(
            new ComputeError('UNAVAILABLE', `${command} ${args.slice(0, 6).join(' ')} failed: ${why}`, {
              hint: 'The provisioning network needs root (CAP_NET_ADMIN) and the ip tool (iproute2).',
            }),
          );
        } else resolvePromise(String(stdout));
      },
    );
  });
}

const quietly = (command: string, args: string[]) =>
  run(command, args).then(
    () => true,
    () => false,
  );

/** Whether a link of that name exists in the root namespace. */
function linkExists(name: string): boolean {
  try {
    return readdirSync('/sys/class/net').includes(name);
  } catch {
    return false;
  }
}

function namespaceExists(name: string): boolean {
  try {
    return readdirSync('/run/netns').includes(name);
  } catch {
    return false;
  }
}

/** The namespace, the bridge and the veth pair between them; `address` (CIDR) on the service's end. */
export async function makeLinks(
  names: ProvisioningNames,
  address: string,
  address6: string,
  uplinks: readonly string[],
): Promise<void> {
  const ip = (...args: string[]) => run('ip', args);
  const noIpv6 = (link: string) =>
    run('sysctl', ['-qw', `net.ipv6.conf.${link}.disable_ipv6=1`]).catch(() => '');
  await ip('netns', 'add', names.namespace);
  await ip('link', 'add', names.bridge, 'type', 'bridge');
  // The bridge carries the network, it takes no part in it: no address, no IPv6 autoconfiguration.
  await noIpv6(names.bridge);
  await ip('link', 'add', names.hostVeth, 'type', 'veth', 'peer', 'name', names.serviceVeth);
  await noIpv6(names.hostVeth);
  await ip('link', 'set', names.serviceVeth, 'netns', names.namespace);
  await ip('link', 'set', names.hostVeth, 'master', names.bridge);
  for (const uplink of uplinks) {
    await ip('link', 'set', uplink, 'master', names.bridge);
    await ip('link', 'set', uplink, 'up');
  }
  await ip('link', 'set', names.bridge, 'up');
  await ip('link', 'set', names.hostVeth, 'up');
  await ip('-n', names.namespace, 'link', 'set', 'lo', 'up');
  await ip('-n', names.namespace, 'addr', 'add', address, 'dev', names.serviceVeth);
  // Only for dnsmasq's router advertisements: iPXE waits ~13 s for IPv6 when nothing answers it.
  await ip('-n', names.namespace, 'addr', 'add', address6, 'dev', names.serviceVeth, 'nodad');
  await ip('-n', names.namespace, 'link', 'set', names.serviceVeth, 'up');
}

/** Removes the links and the namespace; what is already gone is skipped. Interfaces joined to the bridge are released, never deleted. */
export async function removeLinks(names: ProvisioningNames): Promise<number> {
  let removed = 0;
  // The veth's other end goes with it; deleting the bridge releases the uplinks.
  for (const link of [names.hostVeth, names.bridge])
    if (linkExists(link) && (await quietly('ip', ['link', 'del', link]))) removed += 1;
  if (namespaceExists(names.namespace) && (await quietly('ip', ['netns', 'del', names.namespace])))
    removed += 1;
  return removed;
}

/** dnsmasq and busybox (httpd) processes whose command line names `dir`. */
function strayProcesses(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (comm !== 'dnsmasq' && comm !== 'busybox') continue;
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (args.some((arg) => arg.includes(`${dir}/`))) found.push(Number(name));
    } catch {
      // Gone while the table was read.
    }
  }
  return found;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Ends a process: SIGTERM, then SIGKILL after `graceMs`; resolves once it is gone (or a zombie). */
export async function endProcess(pid: number, start: string | null, graceMs = 2000): Promise<boolean> {
  const alive = () => (start ? sameProcess(pid, start) : processStart(pid) !== null);
  if (!alive()) return false;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return false;
  }
  for (let waited = 0; waited < graceMs && alive(); waited += 25) await sleep(25);
  if (alive()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    for (let waited = 0; waited < 2000 && alive(); waited += 25) await sleep(25);
  }
  return true;
}

export interface ProvisioningSweep {
  processes: number;
  links: number;
  files: boolean;
}

/**
 * Removes what a service over `dir` left: its processes, links, namespace and files. Safe on a
 * directory that holds nothing of it; the directory itself goes when it is empty afterwards.
 */
export async function sweepProvisioningNetwork(dir: string): Promise<ProvisioningSweep> {
  const absolute = resolve(dir);
  const report: ProvisioningSweep = { processes: 0, links: 0, files: false };
  const record = readRecord(absolute);
  for (const entry of record?.processes ?? [])
    if (await endProcess(entry.pid, entry.start)) report.processes += 1;
  for (const pid of strayProcesses(absolute)) if (await endProcess(pid, null)) report.processes += 1;
  report.links = await removeLinks(namesOf(absolute));
  if (record?.names && record.names.namespace !== namesOf(absolute).namespace)
    report.links += await removeLinks(record.names);
  for (const part of ['tftp', 'http', 'reports', 'private']) {
    try {
      readdirSync(join(absolute, part));
      rmSync(join(absolute, part), { recursive: true, force: true });
      report.files = true;
    } catch {
      // Not there.
    }
  }
  return report;
}
