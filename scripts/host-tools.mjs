#!/usr/bin/env node
/**
 * The host programs better-compute runs for real, grouped by who needs them, and the Debian package
 * of each. This file is their one list: the test set-up installs the groups of the suites it is
 * about to run, `npm run dev` the `node` group for the real node on this machine.
 *
 *   node scripts/host-tools.mjs [GROUP…]          install what is missing of those groups (as root)
 *   node scripts/host-tools.mjs --check [GROUP…]  list what is missing, install nothing
 *
 * Groups: e2e (OpenSSH and the shells the end-to-end suites drive), node (what a real node runs:
 * QEMU guests, bubblewrap sandboxes, their networks, the guest image's build), site (what a site
 * agent runs for bare metal: ipmitool for BMCs, dnsmasq and busybox for the provisioning network),
 * guest (node and site plus the test suites' own tools: OpenIPMI's ipmi_sim as a machine's BMC, the
 * iPXE ROMs QEMU's network cards boot from), image (podman and runc for the server image), browser
 * (Chromium), all. A name starting with / is a file rather than a command. Without root the missing
 * ones are listed with the command that installs them, and nothing is installed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const OPENSSH = {
  ssh: 'openssh-client',
  'ssh-keygen': 'openssh-client',
  sshd: 'openssh-server',
};

/** What the real node daemon runs on a machine: guests, sandboxes, their networks, the guest image. */
const NODE = {
  ...OPENSSH,
  'qemu-system-x86_64': 'qemu-system-x86',
  'qemu-img': 'qemu-utils',
  genisoimage: 'genisoimage',
  bwrap: 'bubblewrap',
  slirp4netns: 'slirp4netns',
  // An instance's network: its namespace, veth and tap (ip), NAT and the egress rules (nft).
  ip: 'iproute2',
  nft: 'nftables',
  losetup: 'mount',
  // The guest image's build (scripts/build-guest-image.sh).
  debootstrap: 'debootstrap',
  'mkfs.ext4': 'e2fsprogs',
  xz: 'xz-utils',
  zstd: 'zstd',
  flock: 'util-linux',
};

/** What a site agent runs for bare metal (packages/daemon/src/metal): BMCs and the provisioning network. */
const SITE = {
  ipmitool: 'ipmitool',
  dnsmasq: 'dnsmasq-base',
  busybox: 'busybox-static',
  ip: 'iproute2',
};

/**
 * The server image's build and run (deploy/, test/guest/deploy-image.test.ts): podman with the runc
 * runtime (crun fails on hybrid cgroups), the local stand-in for the Node base image
 * (scripts/build-node-base.sh), the build script's shellcheck and the unit's systemd-analyze.
 */
const IMAGE = {
  podman: 'podman',
  runc: 'runc',
  debootstrap: 'debootstrap',
  flock: 'util-linux',
  shellcheck: 'shellcheck',
  'systemd-analyze': 'systemd',
};

/** Command on PATH (or a file, by its absolute path) → the Debian package that provides it, per group. */
export const HOST_TOOL_GROUPS = {
  e2e: { ...OPENSSH, zsh: 'zsh', fish: 'fish', shellcheck: 'shellcheck' },
  node: NODE,
  site: SITE,
  guest: {
    ...NODE,
    ...SITE,
    shellcheck: 'shellcheck',
    // The metal lab (packages/daemon/test/metal-lab.test.ts): a machine's BMC, its network card's iPXE.
    ipmi_sim: 'openipmi',
    '/usr/lib/ipxe/qemu/efi-e1000.rom': 'ipxe-qemu',
    // A rendered provision profile's partition script on a loop disk (profiles-disk.test.ts).
    sfdisk: 'fdisk',
    'mkfs.vfat': 'dosfstools',
  },
  image: IMAGE,
  browser: { chromium: 'chromium' },
};

/** The commands of the named groups, with their packages. */
export function toolsOf(groups) {
  const names = groups.includes('all') ? Object.keys(HOST_TOOL_GROUPS) : groups;
  const tools = {};
  for (const name of names) {
    const group = HOST_TOOL_GROUPS[name];
    if (!group)
      throw new Error(
        `host-tools: no group ${name} (groups: ${Object.keys(HOST_TOOL_GROUPS).join(', ')}, all)`,
      );
    Object.assign(tools, group);
  }
  return tools;
}

function onPath(command) {
  if (command.startsWith('/')) return existsSync(command);
  // sshd lives in /usr/sbin, which a non-login PATH may lack.
  const path = `${process.env.PATH ?? ''}:/usr/sbin:/sbin`;
  return (
    spawnSync('sh', ['-c', 'command -v "$1"', 'sh', command], {
      stdio: 'ignore',
      env: { ...process.env, PATH: path },
    }).status === 0
  );
}

export function missingTools(groups) {
  return Object.keys(toolsOf(groups)).filter((command) => !onPath(command));
}

/** The apt-get line that installs what is missing of the groups, or null when nothing is. */
export function installCommand(groups) {
  const tools = toolsOf(groups);
  const packages = [...new Set(missingTools(groups).map((command) => tools[command]))];
  return packages.length === 0 ? null : `sudo apt-get install -y ${packages.join(' ')}`;
}

/**
 * Installs every missing package of the groups in one apt-get run; returns the commands still
 * missing. Without root it installs nothing and says which command would.
 */
export function installHostTools(groups, { log = console.error, why = 'the tests' } = {}) {
  const tools = toolsOf(groups);
  const missing = missingTools(groups);
  if (missing.length === 0) return [];
  const packages = [...new Set(missing.map((command) => tools[command]))];
  if (process.getuid?.() !== 0) {
    log(
      `better-compute: ${why} need ${missing.join(', ')}; run: sudo apt-get install -y ${packages.join(' ')}`,
    );
    return missing;
  }
  log(`better-compute: installing ${packages.join(' ')} for ${why}…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Waits for dpkg's lock rather than failing when another apt run holds it.
  const apt = (...args) =>
    spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], { env, encoding: 'utf8' });
  const install = () => apt('install', '-y', '-qq', '--no-install-recommends', ...packages);
  let result = install();
  if (result.status !== 0) {
    apt('update', '-qq');
    result = install();
  }
  const still = missingTools(groups);
  if (still.length > 0)
    log(`better-compute: apt-get could not install ${still.join(', ')}: ${result.stderr.slice(-400)}`);
  return still;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const groups = args.filter((arg) => !arg.startsWith('--'));
  const chosen = groups.length > 0 ? groups : ['all'];
  if (args.includes('--check')) {
    const missing = missingTools(chosen);
    console.log(missing.length === 0 ? 'every host tool is present' : `missing: ${missing.join(' ')}`);
  } else {
    process.exitCode = installHostTools(chosen).length === 0 ? 0 : 1;
  }
}
