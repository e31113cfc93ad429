/**
 * A rendered profile against the real disk tools, as root (guest project: its set-up installs
 * fdisk and dosfstools): the layout is one the real sfdisk writes, and partition.sh partitions and
 * formats a real (loop) disk as the layout says. The API side of render is in profiles.test.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProfileDocument } from '@better-compute/core/methods';
import { afterAll, describe, expect, it } from 'vitest';
import { renderProfile } from '../src/modules/profiles/index.js';

const work = mkdtempSync(join(tmpdir(), 'bc-profiles-disk-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function render(disk: ProfileDocument['disk']) {
  const document = {
    name: 'gpu-worker',
    image: { imageId: 'img_01k00000000000000000000000' },
    disk,
    node: { poolId: 'pool_01k00000000000000000000000', labels: {} },
    joinTokenRef: 'secret://acme/sec_01k00000000000000000000000',
  } as ProfileDocument;
  const rendered = renderProfile({
    tenantId: 'acme',
    document,
    profile: null,
    image: {
      id: 'img_01k00000000000000000000000',
      name: 'debian-12',
      sha256: 'a'.repeat(64),
      disk_format: 'qcow2',
      size_bytes: '1024',
      source: 'https://images.example.com/debian-12.qcow2',
      architecture: 'x86_64',
    },
  });
  return Object.fromEntries(rendered.files.map((f) => [f.path, f]));
}

// Root is needed for the loop device; the guest project runs as root on CI and here.
describe.skipIf(process.getuid?.() !== 0)('a rendered profile on the real disk tools', () => {
  it('the layout is one the real sfdisk writes', () => {
    const files = render({
      target: { bySize: 'largest', minGiB: 100 },
      partitions: [
        { label: 'efi', sizeMiB: 512, filesystem: 'vfat', mount: '/boot/efi' },
        { label: 'swap', sizeMiB: 4096, filesystem: 'swap' },
        { label: 'var', sizeMiB: 20480, filesystem: 'xfs', mount: '/var' },
        { label: 'root', filesystem: 'ext4', mount: '/' },
      ],
    });
    const disk = join(work, 'disk.raw');
    execFileSync('truncate', ['-s', '32G', disk]);
    execFileSync('sfdisk', ['--quiet', disk], { input: files['disk/layout.sfdisk']!.content });
    const table = JSON.parse(execFileSync('sfdisk', ['--json', disk]).toString()).partitiontable;
    expect(table.label).toBe('gpt');
    expect(table.partitions.map((p: any) => [p.name, p.type])).toEqual([
      ['efi', 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B'],
      ['swap', '0657FD6D-A4AB-43C4-84E5-0933C84B4F4F'],
      ['var', '0FC63DAF-8483-4772-8E79-3D69D8477DE4'],
      ['root', '4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709'],
    ]);
    expect(table.partitions[0].size * table.sectorsize).toBe(512 * 1024 * 1024);
    // The root partition takes the rest of the disk.
    expect(table.partitions[3].size * table.sectorsize).toBeGreaterThan(7 * 1024 ** 3);
  });

  it('partition.sh partitions and formats a real disk (a loop device) as the layout says', () => {
    const raw = join(work, 'loop.raw');
    execFileSync('truncate', ['-s', '1G', raw]);
    const loop = execFileSync('losetup', ['--find', '--show', raw]).toString().trim();
    try {
      const files = render({
        target: { path: loop },
        partitions: [
          { label: 'efi', sizeMiB: 64, filesystem: 'vfat', mount: '/boot/efi' },
          { label: 'swap', sizeMiB: 64, filesystem: 'swap' },
          { label: 'root', filesystem: 'ext4', mount: '/' },
        ],
      });
      const dir = join(work, 'loop-render');
      for (const f of Object.values(files)) {
        execFileSync('mkdir', ['-p', join(dir, f.path, '..')]);
        writeFileSync(join(dir, f.path), f.content, { mode: Number.parseInt(f.mode, 8) });
      }
      const run = spawnSync('sh', [join(dir, 'disk', 'partition.sh')], { encoding: 'utf8', timeout: 60_000 });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toBe(`${loop}\n`);
      const probe = (n: number) =>
        Object.fromEntries(
          execFileSync('blkid', ['-p', '-o', 'export', `${loop}p${n}`])
            .toString()
            .trim()
            .split('\n')
            .map((line) => line.split('=', 2) as [string, string]),
        );
      expect([1, 2, 3].map((n) => [probe(n).PART_ENTRY_NAME, probe(n).TYPE, probe(n).LABEL])).toEqual([
        ['efi', 'vfat', 'EFI'],
        ['swap', 'swap', 'swap'],
        ['root', 'ext4', 'root'],
      ]);
      expect(probe(3).PART_ENTRY_TYPE).toBe('4f68bce3-e8cd-4db1-96e7-fbcaf984b709');
    } finally {
      spawnSync('partx', ['--delete', loop]);
      spawnSync('losetup', ['--detach', loop]);
    }
  });
});
