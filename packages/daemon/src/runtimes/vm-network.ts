/**
 * An instance's network: a network namespace of its own holding the VM's tap device, joined to the
 * node by a veth pair, with a private address carved from the node's instance range.
 *
 * Each instance has a /29 of the range (a slot): its first /30 is the veth link (the node's end .1,
 * the namespace's end .2), its second the guest's link (the namespace's tap .5 is the guest's
 * gateway, the guest .6). The node routes the guest's /30 through the veth, so the daemon reaches
 * `<guest>:<port>` directly; the namespace forwards between the veth and the tap. The slot is
 * recorded in the instance's spec.json at create, so allocation is derived from the disk and
 * survives restarts; the names come from the instance id.
 *
 * The rules live in one nftables table the product owns (`ip better_compute`), the same for every
 * instance: from an instance veth, nothing new reaches the node itself (replies to what the node
 * opened pass), nothing reaches another instance, and new flows out through the node's other
 * interfaces pass and are masqueraded only for guests in the `egress` set. Turning egress on or
 * off for an instance is adding or removing its address from that set.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tool } from './qemu-disk.js';
import { RuntimeError } from './image-cache.js';
import type { InstanceNetwork } from './instance-network.js';
import type { Ledger } from './ledger.js';

/** The range instances' addresses are carved from unless the node says otherwise. */
export const DEFAULT_INSTANCE_RANGE = '10.213.0.0/16';
const TABLE = 'better_compute';
/** Every host-side veth of an instance starts so, which is what the rules match on. */
const PREFIX = 'bci-';
const SLOT_SIZE = 8;

const toInt = (address: string) => address.split('.').reduce((value, part) => value * 256 + Number(part), 0);
const toAddress = (value: number) =>
  [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');

/** A range `a.b.c.d/n` as its first address and size; a malformed or too-small one is refused. */
export function parseRange(cidr: string): { first: number; slots: number } {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  const bits = Number(match?.[5]);
  if (!match || match.slice(1, 5).some((part) => Number(part) > 255) || bits < 8 || bits > 29)
    throw new RuntimeError(`the instance range ${cidr.slice(0, 64)} is not an IPv4 CIDR from /8 to /29`);
  const size = 2 ** (32 - bits);
  const first = toInt(match.slice(1, 5).join('.'));
  if (first % size !== 0)
    throw new RuntimeError(`the instance range ${cidr} does not start on a /${bits} boundary`);
  return { first, slots: size / SLOT_SIZE };
}

/** The names and addresses of slot `slot` of `range` for instance `id`. */
export function networkOf(id: string, range: string, slot: number): InstanceNetwork {
  const { first, slots } = parseRange(range);
  if (!Number.isInteger(slot) || slot < 0 || slot >= slots)
    throw new RuntimeError(`slot ${slot} is outside the instance range ${range}`);
  const base = first + slot * SLOT_SIZE;
  const guest = base + 6;
  // 52:54:00 is QEMU's prefix; the rest is the guest address's last three bytes, unique on the node.
  const mac = ['52', '54', '00', ...[16, 8, 0].map((s) => (Math.floor(guest / 2 ** s) % 256).toString(16).padStart(2, '0'))].join(':'); // prettier-ignore
  return {
    slot,
    // At most 15 characters (a link name's limit): bci- and 10 hex digits of the id's digest.
    name: PREFIX + createHash('sha256').update(id).digest('hex').slice(0, 10),
    hostAddress: toAddress(base + 1),
    peerAddress: toAddress(base + 2),
    gateway: toAddress(base + 5),
    address: toAddress(guest),
    mac,
  };
}

/** The slot of `range` a guest address lies in, or null outside it. */
function slotOf(range: string, address: string): number | null {
  const { first, slots } = parseRange(range);
  const slot = Math.floor((toInt(address) - first) / SLOT_SIZE);
  return slot >= 0 && slot < slots ? slot : null;
}

/**
 * Instance `id`'s network in the lowest slot of `range` that neither `held` (the node's other
 * instances) nor `reserved` takes. A held network counts by its guest address, so one recorded under
 * another range still counts where it lies in this one; none left is an error that says so.
 */
export function pickNetwork(
  id: string,
  range: string,
  held: InstanceNetwork[],
  reserved: Set<number>,
): InstanceNetwork {
  const { slots } = parseRange(range);
  const used = new Set(reserved);
  const name = networkOf(id, range, 0).name;
  for (const net of held) {
    if (net.name === name)
      throw new RuntimeError(`instance ${id}'s network name ${name} is taken on this node`);
    const slot = slotOf(range, net.address);
    if (slot !== null) used.add(slot);
  }
  for (let slot = 0; slot < slots; slot++) if (!used.has(slot)) return networkOf(id, range, slot);
  throw new RuntimeError(`the instance range ${range} is full (${slots} instances); widen it on this node`);
}

/**
 * The seed's network-config: the subset of NoCloud's version 2 the project's guest reads (and
 * cloud-init reads too): the NIC by its MAC, the address, the gateway and the node's resolvers.
 */
export function networkConfig(net: InstanceNetwork, nameservers: string[]): string {
  return [
    'version: 2',
    'ethernets:',
    '  eth0:',
    '    match:',
    `      macaddress: "${net.mac}"`,
    '    addresses:',
    `      - ${net.address}/30`,
    `    gateway4: ${net.gateway}`,
    ...(nameservers.length ? ['    nameservers:', `      addresses: [${nameservers.join(', ')}]`] : []),
    '',
  ].join('\n');
}

/**
 * The node's resolvers a guest can use: the IPv4 ones of /etc/resolv.conf that are not loopback
 * (a local stub such as 127.0.0.53 is the node's own; the guest cannot reach it). They answer only
 * through egress.
 */
export function guestNameservers(resolvConf = '/etc/resolv.conf'): string[] {
  let text = '';
  try {
    text = readFileSync(resolvConf, 'utf8');
  } catch {
    return [];
  }
  return [...text.matchAll(/^nameserver\s+(\d{1,3}(?:\.\d{1,3}){3})\s*$/gm)]
    .map((match) => match[1]!)
    .filter((address) => !address.startsWith('127.'))
    .slice(0, 3);
}

const ip = (args: string[]) => tool('ip', args, 30_000);
/** The guest's /30 (its address is the second host of it). */
const guestSubnet = (net: InstanceNetwork) => `${toAddress(toInt(net.address) - 2)}/30`;
const nft = (args: string[]) => tool('nft', args, 30_000);

/**
 * The table, whole: written in one transaction (the delete of a table that does not exist is
 * made harmless by adding it empty first), so the rules never have a gap while it is replaced.
 */
function tableScript(egress: string[]): string {
  const set = egress.length ? `elements = { ${egress.join(', ')} }` : '';
  return `table ip ${TABLE} {}
delete table ip ${TABLE}
table ip ${TABLE} {
  # Guests whose new flows may leave through the node's uplinks (masqueraded).
  set egress { type ipv4_addr; ${set} }
  chain prerouting {
    type filter hook prerouting priority raw; policy accept;
    # A guest speaks only from its own /30: a source not routed back through its veth is spoofed.
    iifname "${PREFIX}*" fib saddr . iif oif missing drop
  }
  chain input {
    type filter hook input priority filter; policy accept;
    # The node's own addresses (the daemon, the control plane) open nothing to a guest; replies
    # to the connections the daemon opened to it pass.
    iifname "${PREFIX}*" ct state established,related accept
    iifname "${PREFIX}*" drop
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    ct state established,related accept
    iifname "${PREFIX}*" oifname != "${PREFIX}*" ip saddr @egress accept
    iifname "${PREFIX}*" drop
    # Nothing from elsewhere opens a connection to a guest: only the node reaches it.
    oifname "${PREFIX}*" drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname != "${PREFIX}*" ip saddr @egress masquerade
  }
}
`;
}

/** Runs an nft script given on standard input. */
async function nftScript(script: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = execFile('nft', ['-f', '-'], { timeout: 30_000 }, (error, _stdout, stderr) => {
      if (error)
        reject(new RuntimeError(`nft failed: ${String(stderr).trim().slice(-1000) || error.message}`));
      else resolve();
    });
    child.stdin!.end(script);
  });
}

/** The instance links on this machine now, of any daemon (the rules match them by their prefix). */
function instanceLinks(): string[] {
  return readdirSync('/sys/class/net').filter((name) => name.startsWith(PREFIX));
}

/** The node's own rules and routes for its instances' namespaces. */
export class VmNetwork {
  private forwarding = false;

  constructor(
    readonly range: string = process.env.BCD_INSTANCE_RANGE || DEFAULT_INSTANCE_RANGE,
    private readonly log: (line: string) => void = () => {},
    /** Where each network is noted before it is made, so a sweep finds what a killed daemon left. */
    private readonly ledger: Ledger | null = null,
  ) {
    parseRange(range);
  }

  /**
   * Writes the table afresh (the rules as this version has them) with `egress` (the running guests
   * that have it) in its set, beside what the set held: how a starting daemon makes the rules match
   * the VMs it found again. Addresses kept that no guest uses any more grant nothing to the next
   * guest given them: `up` clears its address first.
   */
  async restore(egress: string[]): Promise<void> {
    const held = await nft(['-j', 'list', 'set', 'ip', TABLE, 'egress']).then(
      (json) => {
        const listed = JSON.parse(json) as { nftables?: { set?: { elem?: unknown[] } }[] };
        const elements = listed.nftables?.find((item) => item.set)?.set?.elem ?? [];
        return elements.filter((e): e is string => typeof e === 'string' && /^[\d.]{7,15}$/.test(e));
      },
      () => [] as string[],
    );
    const all = [...new Set([...held, ...egress])];
    await nftScript(tableScript(all));
    this.tableReady = Promise.resolve();
    if (egress.length) await this.enableForwarding();
  }

  private tableReady: Promise<void> | undefined;
  /** The table exists (made once per daemon, keeping what a running daemon added since). */
  private ensureTable(): Promise<void> {
    this.tableReady ??= nft(['list', 'table', 'ip', TABLE]).then(
      () => undefined,
      () => nftScript(tableScript([])),
    );
    return this.tableReady.catch((error: Error) => {
      this.tableReady = undefined;
      throw error;
    });
  }

  /** The node forwards IPv4 (what egress needs; the namespace's own forwarding is apart). */
  private async enableForwarding(): Promise<void> {
    if (this.forwarding) return;
    const path = '/proc/sys/net/ipv4/ip_forward';
    if ((await readFile(path, 'utf8')).trim() !== '1') {
      await writeFile(path, '1\n');
      this.log('bcd: IPv4 forwarding turned on for instances’ egress (net.ipv4.ip_forward=1)');
    }
    this.forwarding = true;
  }

  /**
   * Makes the instance's namespace, veth, tap and routes afresh (what a crash or an earlier boot
   * left is removed first, so a retried start never fails on it), and sets its egress.
   */
  async up(net: InstanceNetwork, egress: boolean): Promise<void> {
    if (process.getuid?.() !== 0)
      throw new RuntimeError(
        'an instance needs bcd to run as root on its node: its network namespace, links and nftables rules are made by the daemon',
      );
    await this.ensureTable();
    await this.down(net);
    const ns = net.name;
    this.ledger?.record({ kind: 'network', net });
    try {
      await ip(['netns', 'add', ns]);
      await ip(['link', 'add', ns, 'type', 'veth', 'peer', 'name', 'veth0', 'netns', ns]);
      // Another daemon stopping with its VMs removes the table once no instance link is left on the
      // machine (removeTableIfUnused), which may have been since this daemon last made it: checked
      // again now that this instance's link is there, so a guest never runs without its rules.
      this.tableReady = undefined;
      await this.ensureTable();
      await ip(['addr', 'add', `${net.hostAddress}/30`, 'dev', ns]);
      await ip(['link', 'set', ns, 'up']);
      const inside = (args: string[]) => ip(['-n', ns, ...args]);
      await inside(['link', 'set', 'lo', 'up']);
      await inside(['addr', 'add', `${net.peerAddress}/30`, 'dev', 'veth0']);
      await inside(['link', 'set', 'veth0', 'up']);
      await inside(['tuntap', 'add', 'dev', 'tap0', 'mode', 'tap']);
      await inside(['addr', 'add', `${net.gateway}/30`, 'dev', 'tap0']);
      await inside(['link', 'set', 'tap0', 'up']);
      await inside(['route', 'add', 'default', 'via', net.hostAddress]);
      // The namespace routes between the tap and the veth; a new namespace does not forward.
      await tool('ip', ['netns', 'exec', ns, 'sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward'], 30_000);
      await ip(['route', 'replace', guestSubnet(net), 'via', net.peerAddress, 'dev', ns]);
      if (egress) {
        await this.enableForwarding();
        const add = () => nft(['add', 'element', 'ip', TABLE, 'egress', `{ ${net.address} }`]);
        // The table may have been removed and written again empty meanwhile (removeTableIfUnused).
        await add().catch(async () => {
          this.tableReady = undefined;
          await this.ensureTable();
          await add();
        });
      }
    } catch (error) {
      await this.down(net);
      throw new RuntimeError(`the instance's network could not be made: ${(error as Error).message}`);
    }
  }

  /** Removes the instance's namespace (its tap and veth go with it), route and egress; idempotent. */
  async down(net: InstanceNetwork): Promise<void> {
    await nft(['delete', 'element', 'ip', TABLE, 'egress', `{ ${net.address} }`]).catch(() => undefined);
    if (existsSync(`/run/netns/${net.name}`)) await ip(['netns', 'delete', net.name]).catch(() => undefined);
    // A namespace deleted while QEMU still held it keeps the veth until QEMU exits; gone by name.
    if (existsSync(`/sys/class/net/${net.name}`))
      await ip(['link', 'delete', net.name]).catch(() => undefined);
    await ip(['route', 'delete', guestSubnet(net)]).catch(() => undefined);
    this.ledger?.forgetNetwork(net.name);
  }

  /**
   * Removes the table when no instance network is left on the machine (no `bci-` link): what a
   * daemon stopping with its VMs does. The table is shared by every daemon on the machine, so one
   * another daemon's instance still uses stays.
   */
  async removeTableIfUnused(): Promise<boolean> {
    let links: string[];
    try {
      links = instanceLinks();
    } catch {
      return false;
    }
    if (links.length > 0) return false;
    // Without an instance link the rules match nothing, and addresses left in the set are stale.
    if ((await nft(['list', 'table', 'ip', TABLE]).catch(() => null)) === null) return false;
    await nft(['delete', 'table', 'ip', TABLE]);
    this.tableReady = undefined;
    // Another daemon's instance link made between the look and the delete is never left without
    // its rules: the table is written again (its egress set empty, so the guest fails closed; that
    // daemon, which checks the table after making its link, finds it and goes on).
    if (instanceLinks().length > 0) {
      await nftScript(tableScript([]));
      return false;
    }
    return true;
  }
}
