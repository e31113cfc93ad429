/**
 * A site's provisioning network service: DHCP, TFTP and iPXE for the machines on one layer-2
 * network, in a network namespace of its own, as docs/metal-drivers.md draws it.
 *
 *   uplinks (the site's provisioning NIC, a test VM's tap) ─┐
 *                                                bridge bcpb-<key> (no address)
 *                      veth bcpv-<key> ─────────────────────┘
 *                      veth bcpn-<key> in namespace bcp-<key>: the subnet's first address
 *                           dnsmasq   DHCP (leases from the upper half of the subnet), TFTP boot.ipxe,
 *                                     router advertisements so iPXE does not wait for IPv6
 *                           busybox httpd  port 80: boot.ipxe, discover.ipxe, nodes/<mac>.ipxe, files/<sha256>,
 *                                     and POST cgi-bin/report, a deploy ramdisk's report, into reports/
 *
 * The caller decides every machine's boot: `setBootEntry(mac, entry)` writes the MAC's script (and
 * serves its kernel and initramfs), `null` removes it. A machine whose MAC has no entry gets a lease
 * and the discovery script, and its DHCP request is reported through `onDiscovery` (with its vendor
 * class, user class and UUID when it sent them). Nothing is ever bound because a machine asked:
 * DHCP data is unauthenticated, so deciding is the control plane's, through a person.
 *
 * dnsmasq and the web server drop to the unprivileged user nobody once their ports are open, so the
 * files they serve are world-readable and the service's directory must be reachable by others; the
 * lease file, the DHCP packet dump and the service's record stay in `private/` (0700), opened by
 * dnsmasq as root before it drops. Stop removes everything the service made; start first sweeps
 * what a killed run over the same directory left (provisioning-host.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, statSync } from 'node:fs';
import {
  chmod,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkMac, ComputeError } from '@better-compute/core';
import {
  bootScript,
  checkCmdline,
  discoveryScript,
  entryFileName,
  entryScript,
  type BootEntry,
  type NetworkBoot,
} from './boot-entries.js';
import { DhcpCapture, pcapHeader, type DhcpRequest } from './dhcp-capture.js';
import { openReportSpool, type ReportSpool } from './report-spool.js';
import {
  endProcess,
  makeLinks,
  namesOf,
  privateDir,
  recordProcess,
  removeLinks,
  sweepProvisioningNetwork,
  TOOL_PATH,
  writeRecord,
  type ProvisioningNames,
  type ProvisioningRecord,
} from './provisioning-host.js';

/** A PXE request from a MAC with no boot entry: what the site agent reports for discovery. */
export interface DiscoveryEvent {
  mac: string;
  at: Date;
  type: 'discover' | 'request';
  vendorClass?: string;
  userClass?: string[];
  uuid?: string;
  clientArch?: number;
  hostname?: string;
}

export interface ProvisioningNetworkOptions {
  /** The service's directory (made if missing): what it serves, its record, leases and packet dump. */
  dir: string;
  /** The network, an IPv4 CIDR from /16 to /28 (10.77.0.0/24 by default); the service takes its first address. */
  subnet?: string;
  /** Existing interfaces joined to the network's bridge; released at stop, never deleted or changed otherwise. */
  uplinks?: string[];
  /** What machines without an entry boot (an inspection ramdisk); without one they return to their firmware. */
  discoveryImage?: NetworkBoot | null;
  onDiscovery: (event: DiscoveryEvent) => void;
  /**
   * Takes what a deploy ramdisk POSTs to `/cgi-bin/report` (its body, report-spool.ts's limit),
   * unchecked: the caller holds the tokens that say whether it is one. Without it there is no CGI.
   */
  onReport?: (body: string) => void;
  log?: (line: string) => void;
}
const LEASE_TIME = '1h';
/** The most discovery reports a minute (docs/decisions/metal-drivers.md). */
const DISCOVERY_PER_MINUTE = 120;
/** The iPXE NIC firmware that plain PXE ROMs chain to (Debian package ipxe), served when present. */
const UNDIONLY = '/usr/lib/ipxe/undionly.kpxe';

const toInt = (address: string) => address.split('.').reduce((value, part) => value * 256 + Number(part), 0);
const toAddress = (value: number) =>
  [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');

/** The subnet's server address, lease range and mask. */
export function planSubnet(cidr: string): {
  server: string;
  prefix: number;
  first: string;
  last: string;
  mask: string;
} {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  const prefix = Number(match?.[5]);
  if (!match || match.slice(1, 5).some((part) => Number(part) > 255) || prefix < 16 || prefix > 28)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `the provisioning subnet ${JSON.stringify(cidr.slice(0, 40))} is not an IPv4 CIDR from /16 to /28`,
    );
  const size = 2 ** (32 - prefix);
  const network = toInt(match.slice(1, 5).join('.'));
  if (network % size !== 0)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `the provisioning subnet ${cidr} does not start on a /${prefix} boundary`,
    );
  return {
    server: toAddress(network + 1),
    prefix,
    first: toAddress(network + size / 2),
    last: toAddress(network + size - 2),
    mask: toAddress(2 ** 32 - size),
  };
}

/** Whether every directory from `/` down to `dir` lets other users through (dnsmasq and httpd run as nobody). */
function reachableByOthers(dir: string): string | null {
  for (let path = resolve(dir); ; path = dirname(path)) {
    const mode = statSync(path).mode;
    if ((mode & 0o001) === 0) return path;
    if (path === dirname(path)) return null;
  }
}

function hasProgram(name: string): boolean {
  return TOOL_PATH.split(':').some((dir) => dir && existsSync(join(dir, name)));
}

/** The user and group the web server drops to: nobody, and nogroup where it exists (Debian). */
async function unprivileged(): Promise<string> {
  const groups = await readFile('/etc/group', 'utf8').catch(() => '');
  return /^nogroup:/m.test(groups) ? 'nobody:nogroup' : 'nobody:nobody';
}

export class ProvisioningNetwork {
  readonly dir: string;
  readonly names: ProvisioningNames;
  /** The bridge: join more interfaces to it with `ip link set IF master <bridge>`. */
  readonly bridge: string;
  readonly serverAddress: string;
  readonly #options: ProvisioningNetworkOptions;
  readonly #entries = new Map<string, BootEntry>();
  readonly #reported = new Set<string>();
  readonly #record: ProvisioningRecord;
  readonly #children = new Set<ChildProcess>();
  readonly #recent: string[] = [];
  #capture: DhcpCapture | null = null;
  #reports: ReportSpool | null = null;
  #discoveryFiles: string[] = [];
  #changes: Promise<unknown> = Promise.resolve();
  #stopped = false;
  #window = { minute: 0, reported: 0, dropped: 0 };

  private constructor(options: ProvisioningNetworkOptions, server: string) {
    this.dir = resolve(options.dir);
    this.names = namesOf(this.dir);
    this.bridge = this.names.bridge;
    this.serverAddress = server;
    this.#options = options;
    this.#record = { names: this.names, processes: [] };
  }

  /** Sweeps what a killed run left, then brings the network up; stopped again if any step fails. */
  static async start(options: ProvisioningNetworkOptions): Promise<ProvisioningNetwork> {
    const subnet = planSubnet(options.subnet ?? '10.77.0.0/24');
    if (process.getuid?.() !== 0)
      throw new ComputeError(
        'UNSUPPORTED',
        'the provisioning network needs root: it makes a network namespace, a bridge and serves DHCP',
      );
    const missing = ['ip', 'dnsmasq', 'busybox'].filter((name) => !hasProgram(name));
    if (missing.length > 0)
      throw new ComputeError(
        'UNSUPPORTED',
        `the provisioning network needs ${missing.join(', ')}, not installed here`,
        {
          hint: 'Install iproute2, dnsmasq-base and busybox-static (node scripts/host-tools.mjs site).',
        },
      );
    for (const uplink of options.uplinks ?? [])
      if (!/^[A-Za-z0-9._-]{1,15}$/.test(uplink) || !existsSync(`/sys/class/net/${uplink}`))
        throw new ComputeError(
          'INVALID_ARGUMENT',
          `the uplink ${JSON.stringify(uplink.slice(0, 20))} is not an interface of this machine`,
        );
    // The path goes into dnsmasq's configuration, where a comma or a line break would mean more.
    if (!/^\/[A-Za-z0-9._+@/-]*$/.test(resolve(options.dir)) || resolve(options.dir) === '/')
      throw new ComputeError(
        'INVALID_ARGUMENT',
        'the provisioning network directory must be a path of letters, digits and . _ + @ - / only, other than /',
      );
    const service = new ProvisioningNetwork(options, subnet.server);
    const swept = await sweepProvisioningNetwork(service.dir);
    if (swept.processes + swept.links > 0)
      service.#log(`swept what a stopped run left: ${swept.processes} process(es), ${swept.links} link(s)`);
    try {
      await service.#up(subnet, options);
    } catch (error) {
      await service.stop().catch(() => undefined);
      throw error;
    }
    return service;
  }

  async #up(subnet: ReturnType<typeof planSubnet>, options: ProvisioningNetworkOptions): Promise<void> {
    const dir = this.dir;
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await chmod(dir, 0o755);
    const closed = reachableByOthers(dir);
    if (closed)
      throw new ComputeError(
        'INVALID_STATE',
        `${closed} does not let other users through, and the provisioning network's dnsmasq and web server run as nobody`,
        {
          hint: 'Put the service directory where every parent directory has the x bit for others (such as /var/lib/better-compute-pxe).',
        },
      );
    for (const part of ['tftp', 'http', 'http/nodes', 'http/files'])
      await mkdir(join(dir, part), { mode: 0o755 });
    await mkdir(privateDir(dir), { mode: 0o700 });
    writeRecord(dir, this.#record);
    if (options.onReport)
      this.#reports = await openReportSpool(this.dir, options.onReport, {
        owner: await unprivileged(),
        publish: (relative, content) => this.#publish(relative, content, 0o755),
        log: (line) => this.#log(line),
      });

    const base = `http://${subnet.server}`;
    await this.#publish('tftp/boot.ipxe', bootScript(base));
    await this.#publish('http/boot.ipxe', bootScript(base));
    if (existsSync(UNDIONLY)) await this.#copyIn(UNDIONLY, join(dir, 'tftp', 'undionly.kpxe'));
    await this.#setDiscoveryImage(options.discoveryImage ?? null);

    const key = this.names.namespace.slice(4);
    const address6 = `fdbc:${key.slice(0, 4)}:${key.slice(4, 8)}::1`;
    await makeLinks(this.names, `${subnet.server}/${subnet.prefix}`, `${address6}/64`, options.uplinks ?? []);

    const dump = join(privateDir(dir), 'dhcp.pcap');
    await writeFile(dump, pcapHeader(), { mode: 0o600 });
    const config = join(privateDir(dir), 'dnsmasq.conf');
    await writeFile(config, this.#dnsmasqConfig(subnet, address6, dump), { mode: 0o600 });

    this.#capture = new DhcpCapture(dump, (request) => this.#onRequest(request), {
      onError: (error) => this.#log(`reading the DHCP packet dump failed: ${error.message}`),
    });
    await this.#capture.start();

    await this.#spawn(
      'dnsmasq',
      ['dnsmasq', '--keep-in-foreground', `--conf-file=${config}`, '--log-facility=-'],
      /TFTP root is/,
    );
    await this.#spawn(
      'httpd',
      [
        'busybox',
        'httpd',
        '-f',
        '-v',
        '-u',
        await unprivileged(),
        '-p',
        `${subnet.server}:80`,
        '-h',
        join(dir, 'http'),
      ],
      null,
    );
    this.#log(
      `provisioning network up on ${this.bridge}: ${subnet.server}/${subnet.prefix}, leases ${subnet.first}-${subnet.last}`,
    );
  }

  #dnsmasqConfig(subnet: ReturnType<typeof planSubnet>, address6: string, dump: string): string {
    const lines = [
      '# Written by better-compute: the provisioning network service. Replaced at each start.',
      'port=0',
      `interface=${this.names.serviceVeth}`,
      'bind-interfaces',
      'except-interface=lo',
      `dhcp-range=${subnet.first},${subnet.last},${subnet.mask},${LEASE_TIME}`,
      `dhcp-leasefile=${join(privateDir(this.dir), 'leases')}`,
      'dhcp-authoritative',
      'enable-tftp',
      `tftp-root=${join(this.dir, 'tftp')}`,
      // iPXE says who it is with option 175 and user class "iPXE"; plain PXE ROMs chain to iPXE first.
      'dhcp-match=set:ipxe,175',
      'dhcp-userclass=set:ipxe,iPXE',
      ...(existsSync(join(this.dir, 'tftp', 'undionly.kpxe')) ? ['dhcp-boot=tag:!ipxe,undionly.kpxe'] : []),
      'dhcp-boot=tag:ipxe,boot.ipxe',
      // An immediate router advertisement (router lifetime 0): iPXE otherwise waits ~13 s for IPv6.
      'enable-ra',
      `dhcp-range=${address6.replace(/::1$/, '::')},ra-only,64`,
      `ra-param=${this.names.serviceVeth},0,0`,
      `dumpfile=${dump}`,
      'dumpmask=0x1000',
      '',
    ];
    return lines.join('\n');
  }

  /** Starts one of the service's processes in the namespace; resolves when `ready` is in its output. */
  async #spawn(what: string, command: string[], ready: RegExp | null): Promise<void> {
    const child = spawn('ip', ['netns', 'exec', this.names.namespace, ...command], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: TOOL_PATH, LANG: 'C' },
    });
    this.#children.add(child);
    // `ip netns exec` execs the program, so the pid is the program's own.
    recordProcess(this.dir, this.#record, child.pid, what);
    let output = '';
    let signalReady: (() => void) | null = null;
    const readyPromise = new Promise<void>((r) => (signalReady = r));
    const onLine = (line: string) => {
      this.#remember(`${what}: ${line}`);
      if (ready?.test(line)) signalReady?.();
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      let partial = '';
      stream.setEncoding('utf8').on('data', (chunk: string) => {
        output = (output + chunk).slice(-2000);
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) if (line.trim()) onLine(line.trim());
      });
    }
    const exited = new Promise<number | null>((r) =>
      child.on('exit', (code) => {
        this.#children.delete(child);
        if (!this.#stopped) this.#log(`${what} exited (${code ?? 'signal'}) while the network was up`);
        r(code);
      }),
    );
    child.on('error', () => undefined);
    const started = ready ? readyPromise : new Promise<void>((r) => setTimeout(r, 300));
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 10_000).unref());
    const outcome = await Promise.race([
      started.then(() => 'ready' as const),
      exited.then(() => 'exited' as const),
      timeout,
    ]);
    if (outcome === 'ready' && child.exitCode === null) return;
    throw new ComputeError(
      'UNAVAILABLE',
      `${what} did not start for the provisioning network: ${outcome === 'timeout' ? 'no answer in 10 s' : output.trim().slice(-400) || 'it exited'}`,
    );
  }

  /**
   * Sets what `mac` boots: over the network (its kernel, initramfs and command line), from its own
   * disk, or nothing (`null`: the machine is treated as unknown again). Takes effect at its next boot.
   */
  async setBootEntry(mac: string, entry: BootEntry | null): Promise<void> {
    // Checked before the change is queued: a refused entry changes nothing.
    const normal = checkMac(mac);
    if (entry !== null && entry !== 'local-disk') {
      if (!entry || typeof entry !== 'object' || typeof entry.kernel !== 'string')
        throw new ComputeError(
          'INVALID_ARGUMENT',
          "a boot entry is { kernel, initrd?, cmdline? }, 'local-disk' or null",
        );
      checkCmdline(entry.cmdline ?? '');
    }
    const change = this.#changes.then(() => this.#applyEntry(normal, entry));
    this.#changes = change.catch(() => undefined);
    await change;
  }

  /** The entries set, by normal MAC. */
  bootEntries(): Map<string, BootEntry> {
    return new Map(this.#entries);
  }

  async #applyEntry(mac: string, entry: BootEntry | null): Promise<void> {
    if (this.#stopped) throw new ComputeError('INVALID_STATE', 'the provisioning network is stopped');
    const script = join('http', 'nodes', entryFileName(mac));
    if (entry === null) {
      await rm(join(this.dir, script), { force: true });
      this.#entries.delete(mac);
    } else if (entry === 'local-disk') {
      await this.#publish(script, entryScript('local-disk'));
      this.#entries.set(mac, 'local-disk');
    } else {
      const served = await this.#serveBoot(entry);
      this.#entries.set(mac, { ...entry });
      // Known before its script exists: a request arriving in between is not reported as discovery.
      await this.#publish(script, entryScript(served));
    }
    await this.#collectFiles();
  }

  async #setDiscoveryImage(image: NetworkBoot | null): Promise<void> {
    if (image) checkCmdline(image.cmdline ?? '');
    const served = image ? await this.#serveBoot(image) : null;
    this.#discoveryFiles = served
      ? [served.kernelUrl, served.initrdUrl ?? ''].map((url) => url.split('/').pop()!)
      : [];
    await this.#publish('http/discover.ipxe', discoveryScript(served));
  }

  /** Copies an entry's kernel and initramfs into files/<sha256> and returns their URLs. */
  async #serveBoot(entry: NetworkBoot): Promise<{ kernelUrl: string; initrdUrl?: string; cmdline: string }> {
    const base = `http://${this.serverAddress}/files`;
    const kernel = await this.#serveFile(entry.kernel, 'kernel');
    const initrd = entry.initrd ? await this.#serveFile(entry.initrd, 'initramfs') : undefined;
    return {
      kernelUrl: `${base}/${kernel}`,
      ...(initrd ? { initrdUrl: `${base}/${initrd}` } : {}),
      cmdline: checkCmdline(entry.cmdline ?? ''),
    };
  }

  async #serveFile(path: string, what: string): Promise<string> {
    const info = await stat(path).catch(() => null);
    if (!info?.isFile())
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `the ${what} ${JSON.stringify(String(path).slice(0, 200))} is not a file on this machine`,
      );
    return this.#copyIn(path, null);
  }

  /** Copies `source` into files/<sha256> (or to `target`), readable by the web server; returns the digest. */
  async #copyIn(source: string, target: string | null): Promise<string> {
    const files = join(this.dir, 'http', 'files');
    const temporary = join(target ? dirname(target) : files, `.incoming-${randomBytes(6).toString('hex')}`);
    const hash = createHash('sha256');
    try {
      await pipeline(
        createReadStream(source),
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            hash.update(chunk);
            done(null, chunk);
          },
        }),
        createWriteStream(temporary, { mode: 0o644 }),
      );
      await chmod(temporary, 0o644);
      const digest = hash.digest('hex');
      await rename(temporary, target ?? join(files, digest));
      return digest;
    } finally {
      await rm(temporary, { force: true });
    }
  }

  /** Removes served files no entry and no discovery image names any more. */
  async #collectFiles(): Promise<void> {
    const wanted = new Set(this.#discoveryFiles);
    for (const name of await readdir(join(this.dir, 'http', 'nodes')).catch(() => [] as string[])) {
      const script = await readFile(join(this.dir, 'http', 'nodes', name), 'utf8').catch(() => '');
      for (const match of script.matchAll(/\/files\/([0-9a-f]{64})/g)) wanted.add(match[1]!);
    }
    for (const name of await readdir(join(this.dir, 'http', 'files')).catch(() => [] as string[]))
      if (/^[0-9a-f]{64}$/.test(name) && !wanted.has(name))
        await unlink(join(this.dir, 'http', 'files', name)).catch(() => undefined);
  }

  /** Writes a served file whole (beside, then renamed), world-readable (and executable for a CGI). */
  async #publish(relative: string, content: string, mode = 0o644): Promise<void> {
    const path = join(this.dir, relative);
    const temporary = `${path}.${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(temporary, content, { mode });
    await chmod(temporary, mode);
    await rename(temporary, path);
  }

  #onRequest(request: DhcpRequest): void {
    if (request.type !== 'discover' && request.type !== 'request') return;
    if (this.#entries.has(request.mac)) return;
    // One event per DHCP exchange: its retransmissions and its REQUEST share the transaction id.
    const key = `${request.mac}/${request.xid}`;
    if (this.#reported.has(key)) return;
    if (this.#reported.size > 4096) this.#reported.clear();
    this.#reported.add(key);
    // Anyone on the network can send DHCP with made-up MACs: reports are capped per minute, and a
    // machine left out is reported when its firmware tries again.
    const minute = Math.floor(Date.now() / 60_000);
    if (minute !== this.#window.minute) {
      if (this.#window.dropped > 0)
        this.#log(
          `${this.#window.dropped} PXE request(s) from unknown MACs went unreported (over ${DISCOVERY_PER_MINUTE} a minute)`,
        );
      this.#window = { minute, reported: 0, dropped: 0 };
    }
    if (this.#window.reported >= DISCOVERY_PER_MINUTE) {
      this.#window.dropped += 1;
      return;
    }
    this.#window.reported += 1;
    const event: DiscoveryEvent = { mac: request.mac, at: request.at, type: request.type };
    for (const field of ['vendorClass', 'userClass', 'uuid', 'clientArch', 'hostname'] as const)
      if (request[field] !== undefined) (event as unknown as Record<string, unknown>)[field] = request[field];
    try {
      this.#options.onDiscovery(event);
    } catch (error) {
      this.#log(`the discovery callback failed: ${(error as Error).message}`);
    }
  }

  /** The last lines dnsmasq and the web server printed (for a failure's report). */
  recentOutput(): string[] {
    return [...this.#recent];
  }

  #remember(line: string): void {
    this.#recent.push(line);
    if (this.#recent.length > 200) this.#recent.shift();
  }

  #log(line: string): void {
    this.#remember(line);
    this.#options.log?.(`pxe: ${line}`);
  }

  /** Stops the processes, removes the links, the namespace and the files; safe to call twice. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#reports?.stop();
    await this.#changes.catch(() => undefined);
    await this.#capture?.stop().catch(() => undefined);
    this.#capture = null;
    for (const entry of [...this.#record.processes].reverse()) await endProcess(entry.pid, entry.start);
    for (const child of this.#children) child.kill('SIGKILL');
    await removeLinks(this.names);
    await sweepProvisioningNetwork(this.dir);
    // The directory itself goes when nothing else was put in it.
    await rmdir(this.dir).catch(() => undefined);
  }
}
