#!/usr/bin/env node
/**
 * The host programs the tests run for real (QEMU, bubblewrap, OpenSSH, shells, Chromium, …), and the
 * Debian package of each. Installed once, before any test file starts, so parallel suites never
 * race for dpkg's lock. Without root the missing ones are listed with the command that installs
 * them, and the suites that need them say so when they run.
 *
 *   node scripts/host-tools.mjs          install what is missing (as root)
 *   node scripts/host-tools.mjs --check  list what is missing, install nothing
 */
import { spawnSync } from 'node:child_process';

/** Command on PATH → the Debian package that provides it. */
export const HOST_TOOLS = {
  'qemu-system-x86_64': 'qemu-system-x86',
  'qemu-img': 'qemu-utils',
  genisoimage: 'genisoimage',
  ssh: 'openssh-client',
  'ssh-keygen': 'openssh-client',
  sshd: 'openssh-server',
  debootstrap: 'debootstrap',
  'mkfs.ext4': 'e2fsprogs',
  bwrap: 'bubblewrap',
  slirp4netns: 'slirp4netns',
  // An instance's network: its namespace, veth and tap (ip), NAT and the egress rules (nft).
  ip: 'iproute2',
  nft: 'nftables',
  shellcheck: 'shellcheck',
  zsh: 'zsh',
  fish: 'fish',
  chromium: 'chromium',
};

function onPath(command) {
  // sshd lives in /usr/sbin, which a non-login PATH may lack.
  const path = `${process.env.PATH ?? ''}:/usr/sbin:/sbin`;
  return (
    spawnSync('sh', ['-c', 'command -v "$1"', 'sh', command], {
      stdio: 'ignore',
      env: { ...process.env, PATH: path },
    }).status === 0
  );
}

export function missingTools() {
  return Object.keys(HOST_TOOLS).filter((command) => !onPath(command));
}

/** Installs every missing package in one apt-get run; returns the commands still missing. */
export function installHostTools({ log = console.error } = {}) {
  const missing = missingTools();
  if (missing.length === 0) return [];
  const packages = [...new Set(missing.map((command) => HOST_TOOLS[command]))];
  if (process.getuid?.() !== 0) {
    log(
      `better-compute: tests need ${missing.join(', ')}; run: sudo apt-get install -y ${packages.join(' ')}`,
    );
    return missing;
  }
  log(`better-compute: installing ${packages.join(' ')} for the tests…`);
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
  const still = missingTools();
  if (still.length > 0)
    log(`better-compute: apt-get could not install ${still.join(', ')}: ${result.stderr.slice(-400)}`);
  return still;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes('--check')) {
    const missing = missingTools();
    console.log(missing.length === 0 ? 'every host tool is present' : `missing: ${missing.join(' ')}`);
  } else {
    installHostTools();
  }
}
