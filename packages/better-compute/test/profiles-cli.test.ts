/**
 * The profiles commands through the real binary against `dev --memory`: validate, create from a file
 * and from standard input, list as a table, get, render --out into a new directory (the files with
 * their modes and digests, the same bytes on every render, an existing directory ALREADY_EXISTS with
 * nothing written), update with --if-version, delete; and the refusals a person meets: no --file, a
 * file that is not JSON, an unknown field named by its path, another tenant's pool, a member's
 * create. The join token's value is in no output.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  computeBin,
  type DevServer,
  type RunResult,
  type RunningServer,
  runCompute,
  startDev,
} from '../../../test/e2e/support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-profiles-cli-'));
let server: RunningServer | undefined;
let url = '';
let dev: DevServer['dev'];
const TOKEN = `jtok-cli-${'8c2f6a1e3b'.repeat(3)}`;
const outputs: string[] = [];

function seen(result: RunResult) {
  outputs.push(result.stdout, result.stderr);
  return result;
}

async function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return seen(await runCompute(args, { cwd: work, url, token, timeoutMs: 30_000 }));
}

/** The binary with `input` on its standard input. */
function withStdin(args: string[], input: string, token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [computeBin, ...args], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '', HOME: work, BETTER_COMPUTE_URL: url, BETTER_COMPUTE_TOKEN: token },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (status) => resolve(seen({ status, stdout, stderr })));
    child.stdin.end(input);
  });
}

async function json(args: string[]) {
  const result = await compute([...args, '--format', 'json']);
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

const code = (result: RunResult) => /^([A-Z_]+):/m.exec(result.stderr)?.[1];
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const ids = { pool: '', image: '', secretRef: '' };
function document(change: (d: any) => void = () => {}) {
  const d: any = {
    name: 'edge',
    image: { imageId: ids.image },
    disk: {
      target: { path: '/dev/disk/by-id/nvme-SAMSUNG_01' },
      partitions: [
        { label: 'efi', sizeMiB: 256, filesystem: 'vfat', mount: '/boot/efi' },
        { label: 'root', filesystem: 'ext4', mount: '/' },
      ],
    },
    packages: ['curl'],
    node: { poolId: ids.pool, labels: { zone: 'edge-1' } },
    joinTokenRef: ids.secretRef,
  };
  change(d);
  return d;
}

beforeAll(async () => {
  ({ server, url, dev } = await startDev(work, []));
  const site = await json(['api', 'sites.create', 'name=edge-site']);
  ids.pool = (
    await json(['api', 'pools.create', `siteId=${site.id}`, 'name=edge', 'class=gpu', 'driver=sim'])
  ).id;
  ids.image = (
    await json([
      'api',
      'images.register',
      'name=edge-os',
      'source=https://images.example.com/edge-os.raw',
      'diskFormat=raw',
      `sha256=${'d'.repeat(64)}`,
      'sizeBytes:=1048576',
      'os=debian-12',
      'channel=stable',
    ])
  ).id;
  const put = await withStdin(['secrets', 'put', 'edge-join', '--stdin'], TOKEN);
  expect(put.status, put.stderr).toBe(0);
  ids.secretRef = JSON.parse(put.stdout).reference;
  writeFileSync(join(work, 'edge.json'), JSON.stringify(document(), null, 2));
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('profiles commands through the real binary', () => {
  let id = '';

  it('validate checks the file and stores nothing; create stores it from standard input', async () => {
    const valid = await json(['profiles', 'validate', '--file', 'edge.json']);
    expect(valid).toMatchObject({
      valid: true,
      name: 'edge',
      pool: { id: ids.pool },
      image: { id: ids.image },
      existing: null,
    });
    expect((await json(['profiles', 'list'])).items).toEqual([]);
    const created = await withStdin(['profiles', 'create', '--file', '-'], JSON.stringify(document()));
    expect(created.status, created.stderr).toBe(0);
    const profile = JSON.parse(created.stdout);
    id = profile.id;
    expect(profile).toMatchObject({
      id: expect.stringMatching(/^prof_/),
      name: 'edge',
      version: 1,
      document: document(),
    });
  });

  it('list is a table; get shows one by name or id', async () => {
    const table = await compute(['profiles', 'list']);
    expect(table.status, table.stderr).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`${id}\\s+edge\\s+1\\s+${ids.pool}\\s+${ids.image}`));
    expect((await compute(['profiles', 'get', 'edge', '--query', 'version'])).stdout.trim()).toBe('1');
    expect((await json(['profiles', 'get', id])).document).toEqual(document());
  });

  it('render --out writes the files with their modes into a new directory, the same bytes each time', async () => {
    const first = await json(['profiles', 'render', 'edge', '--out', 'render-1']);
    const second = await json(['profiles', 'render', id, '--out', 'render-2']);
    expect(first.out).toBe(join(work, 'render-1'));
    expect(first.files.map((f: any) => f.path)).toEqual([
      'bcd/join.json',
      'cloud-init/meta-data',
      'cloud-init/user-data',
      'disk/layout.sfdisk',
      'disk/partition.sh',
      'etc/fstab',
      'image.json',
      'manifest.json',
    ]);
    expect(second.manifestSha256).toBe(first.manifestSha256);
    for (const file of first.files) {
      const one = readFileSync(join(work, 'render-1', file.path));
      const two = readFileSync(join(work, 'render-2', file.path));
      expect(two.equals(one), file.path).toBe(true);
      expect(sha256(one)).toBe(file.sha256);
      expect((statSync(join(work, 'render-1', file.path)).mode & 0o777).toString(8).padStart(4, '0')).toBe(
        file.mode,
      );
    }
    const manifest = JSON.parse(readFileSync(join(work, 'render-1', 'manifest.json'), 'utf8'));
    expect(manifest.files).toHaveLength(7);
    expect(readFileSync(join(work, 'render-1', 'etc', 'fstab'), 'utf8')).toContain(
      'PARTLABEL=root / ext4 defaults,errors=remount-ro 0 1\nPARTLABEL=efi /boot/efi vfat umask=0077 0 2\n',
    );
    expect(readFileSync(join(work, 'render-1', 'disk', 'partition.sh'), 'utf8')).toContain(
      'DISK=$(readlink -f "/dev/disk/by-id/nvme-SAMSUNG_01")',
    );
    // A document that is not stored renders too, from the file.
    const preview = await json(['profiles', 'render', '--file', 'edge.json']);
    expect(preview.profileId).toBeNull();
    expect(preview.files).toHaveLength(8);
  });

  it('render refuses an existing --out directory before it calls, and writes nothing into it', async () => {
    mkdirSync(join(work, 'taken'));
    writeFileSync(join(work, 'taken', 'keep.txt'), 'mine');
    const taken = await compute(['profiles', 'render', 'edge', '--out', 'taken']);
    expect(taken.status).not.toBe(0);
    expect(code(taken)).toBe('ALREADY_EXISTS');
    expect(readdirSync(join(work, 'taken'))).toEqual(['keep.txt']);
    const both = await compute(['profiles', 'render', 'edge', '--file', 'edge.json']);
    expect([both.status, code(both)]).toEqual([2, 'INVALID_ARGUMENT']);
    const neither = await compute(['profiles', 'render']);
    expect([neither.status, code(neither)]).toEqual([2, 'INVALID_ARGUMENT']);
  });

  it('update adds a version only at --if-version; delete removes it', async () => {
    writeFileSync(join(work, 'edge-2.json'), JSON.stringify(document((d) => (d.packages = ['curl', 'jq']))));
    const updated = await json(['profiles', 'update', 'edge', '--file', 'edge-2.json', '--if-version', '1']);
    expect(updated).toMatchObject({ id, version: 2 });
    const stale = await compute(['profiles', 'update', 'edge', '--file', 'edge-2.json', '--if-version', '1']);
    expect(code(stale)).toBe('CONFLICT');
    const staleDelete = await compute(['profiles', 'delete', 'edge', '--if-version', '1']);
    expect(code(staleDelete)).toBe('CONFLICT');
  });

  it('refuses a missing --file, a file that is not JSON, an unknown field, another tenant’s pool, a member', async () => {
    const none = await compute(['profiles', 'create']);
    expect([none.status, code(none)]).toEqual([2, 'INVALID_ARGUMENT']);
    expect(none.stderr).toContain('--file PATH');
    writeFileSync(join(work, 'broken.json'), '{"name": ');
    const broken = await compute(['profiles', 'validate', '--file', 'broken.json']);
    expect(code(broken)).toBe('INVALID_ARGUMENT');
    expect(broken.stderr).toContain('broken.json is not JSON');
    const missing = await compute(['profiles', 'create', '--file', 'nowhere.json']);
    expect(code(missing)).toBe('NOT_FOUND');
    writeFileSync(
      join(work, 'unknown.json'),
      JSON.stringify(document((d) => (d.disk.partitions[0].fs = 'vfat'))),
    );
    const unknown = await compute(['profiles', 'create', '--file', 'unknown.json']);
    expect(code(unknown)).toBe('INVALID_ARGUMENT');
    expect(unknown.stderr).toContain('INVALID_ARGUMENT: document.disk.partitions.0: Unrecognized key: "fs"');
    // A pool acme cannot see is one that does not exist, as far as acme is told.
    writeFileSync(
      join(work, 'foreign.json'),
      JSON.stringify(document((d) => (d.node.poolId = 'pool_01k00000000000000000000000'))),
    );
    const foreign = await compute(['profiles', 'validate', '--file', 'foreign.json']);
    expect(code(foreign)).toBe('NOT_FOUND');
    expect(foreign.stderr).toContain(
      'document.node.poolId: pool pool_01k00000000000000000000000 does not exist',
    );
    writeFileSync(join(work, 'other.json'), JSON.stringify(document((d) => (d.name = 'other'))));
    const member = await compute(['profiles', 'create', '--file', 'other.json'], dev.acmeMember.apiKey);
    expect(code(member)).toBe('ACCESS_DENIED');
    expect((await json(['profiles', 'list'])).items.map((p: any) => p.name)).toEqual(['edge']);
  });

  it('delete removes the profile; it is gone', async () => {
    expect(await json(['profiles', 'delete', 'edge', '--if-version', '2'])).toEqual({
      id,
      name: 'edge',
      deleted: true,
    });
    expect(code(await compute(['profiles', 'get', id]))).toBe('NOT_FOUND');
  });

  it('the join token’s value is in no output: not the commands’, not the server’s', () => {
    for (const text of [...outputs, server!.output()]) expect(text).not.toContain(TOKEN);
  });
});
