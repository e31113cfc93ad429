/**
 * The guest image boots under QEMU and is reached the way a user reaches an instance: a NoCloud seed
 * carries the hostname, a fresh ed25519 public key and a user-data script; the real OpenSSH client
 * logs in with that key; QMP reports the VM running and powers it off. One boot for the whole file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureGuestImage,
  ensureHostTools,
  generateSshKey,
  Guest,
  type GuestImage,
  type SshKey,
} from '../../packages/better-compute/test/guest-support.js';

const tools = ensureHostTools();
const qemuUnavailable = tools.missing.includes('qemu-system-x86_64');

describe.skipIf(qemuUnavailable)('guest image', () => {
  const keyDir = mkdtempSync(join(tmpdir(), 'bc-guest-key-'));
  const instanceId = `i-test-${process.pid}-${Date.now()}`;
  const hostname = `guest-${process.pid}`;
  let image: GuestImage;
  let key: SshKey;
  let guest: Guest;
  let ready: Record<string, string>;

  beforeAll(async () => {
    if (tools.missing.length > 0) {
      throw new Error(`the guest test needs ${tools.missing.join(', ')}: ${tools.reason}`);
    }
    image = await ensureGuestImage();
    key = generateSshKey(keyDir);
    guest = await Guest.start({
      image,
      seed: {
        instanceId,
        hostname,
        sshAuthorizedKeys: [key.publicKey],
        userData: '#!/bin/sh\necho "user-data ran for $(hostname)" > /var/tmp/user-data-ran\n',
      },
    });
    ready = await guest.waitForReady(180_000);
    await guest.waitForSsh(key, image.manifest.defaultUser, 60_000);
  }, 20 * 60_000);

  afterAll(async () => {
    if (guest && guest.exitCode === undefined) await guest.stop(5_000);
    rmSync(keyDir, { recursive: true, force: true });
  });

  it('the image directory holds the kernel, initrd, disk and a manifest that matches them', () => {
    expect(image.manifest.kernelVersion).toMatch(/^\d+\.\d+\.\d+-\d+-amd64$/);
    expect(Object.keys(image.manifest.files).sort()).toEqual(['initrd.img', 'rootfs.qcow2', 'vmlinux']);
  });

  it('prints a ready line with the seed instance id and hostname', () => {
    expect(ready['instance-id']).toBe(instanceId);
    expect(ready.hostname).toBe(hostname);
    expect(ready.address).toMatch(/^10\.0\.2\.\d+\/\d+$/);
  });

  it('logs in over SSH with the seed key and reports the seed hostname', async () => {
    const result = await guest.ssh(key, image.manifest.defaultUser, 'uname -a; hostname; id -un');
    expect(result.code, result.stderr).toBe(0);
    const [uname, name, user] = result.stdout.trim().split('\n');
    expect(uname).toContain(image.manifest.kernelVersion);
    expect(name).toBe(hostname);
    expect(user).toBe(image.manifest.defaultUser);
  });

  it('carries iproute2 and an HTTPS client: a login sees its address and curl has TLS', async () => {
    const result = await guest.ssh(
      key,
      image.manifest.defaultUser,
      'ip -4 -br addr show scope global; curl --version',
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(ready.address);
    expect(result.stdout).toMatch(/^curl \d+\.\d+/m);
    expect(result.stdout).toMatch(/^Protocols:.* https\b/m);
  });

  it('ran the user-data script once, on first boot', async () => {
    const result = await guest.ssh(key, image.manifest.defaultUser, 'cat /var/tmp/user-data-ran');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(`user-data ran for ${hostname}`);
  });

  it('refuses root, and a key the seed did not give', async () => {
    const root = await guest.ssh(key, 'root', 'true');
    expect(root.code).not.toBe(0);
    const strangerDir = mkdtempSync(join(tmpdir(), 'bc-guest-stranger-'));
    try {
      const stranger = await guest.ssh(generateSshKey(strangerDir), image.manifest.defaultUser, 'true');
      expect(stranger.code).not.toBe(0);
    } finally {
      rmSync(strangerDir, { recursive: true, force: true });
    }
  });

  it('QMP reports the VM running, and powers it off through the ACPI button', async () => {
    const qmp = await guest.qmp();
    try {
      expect(await qmp.execute('query-status')).toMatchObject({ running: true, status: 'running' });
    } finally {
      qmp.close();
    }
    const stopped = await guest.stop(60_000);
    expect(stopped.how).toBe('powerdown');
    expect(stopped.code).toBe(0);
    expect(guest.serial.contents()).toContain('better-compute-guest: stopped');
  }, 120_000);
});
