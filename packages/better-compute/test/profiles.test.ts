/**
 * Provision profiles in process, on both databases: create, get, list, update with --if-version and
 * delete, each with its event and audit entry; validate checks a document against the tenant's own
 * pools, images and secrets without storing it; render answers the same bytes every time, its
 * manifest holds every file's digest (the real disk tools' side is profiles-disk.test.ts);
 * bad input (an unknown field anywhere, another tenant's profile, pool, image or secret, NUL bytes,
 * a huge document) is refused with the field's path and changes nothing; and a profile a machine
 * uses is not deleted (the seam the metal module fills). With the real embedded Better IAM: who
 * writes profiles, and naming a join token secret decided as compute:secrets:use on it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, testDatabaseKinds, type TestDatabase } from '@better-compute/db/testing';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { profileForDeploy } from '../src/modules/profiles/index.js';
import { deleteProfile } from '../src/modules/profiles/service.js';
import type { CallContext } from '../src/modules/define-module.js';
import { call, eventually, TestBridge } from './support.js';

const kinds = await testDatabaseKinds();
const SECRET = 'profiles-suite-deployment-secret-0123456789';
const OPS = 't-root-ops';
const ACME = 't-acme-alice';
const GLOBEX = 't-globex-bob';
/** The join token's value: in no answer, file, event or audit entry. */
const TOKEN = `jtok-value-${'5e1d9c0b7a'.repeat(3)}`;
const hasPyYaml = spawnSync('python3', ['-c', 'import yaml']).status === 0;
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe.each(kinds)('provision profiles on %s', (kind) => {
  const work = mkdtempSync(join(tmpdir(), 'bc-profiles-suite-'));
  let database: TestDatabase;
  let compute: ComputeInstance;
  const ids = {} as Record<
    'pool' | 'archivedPool' | 'offeredPool' | 'globexPool' | 'image' | 'platformImage' | 'globexImage',
    string
  > & { secretRef: string; globexSecretRef: string };

  async function api(method: string, body: Record<string, unknown>, token = ACME) {
    const { body: answer } = await call(compute, method, body, { token });
    if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
    return answer.data as any;
  }
  async function fails(method: string, body: unknown, token = ACME, rawBody?: string) {
    const { status, body: answer } = await call(compute, method, body, {
      token,
      ...(rawBody ? { rawBody } : {}),
    });
    if (!answer.error) throw new Error(`${method} succeeded: ${JSON.stringify(answer.data)}`);
    expect(status).toBeLessThan(500);
    return answer.error as { code: string; message: string; details?: Record<string, any> };
  }

  /** A whole document, every field used; `change` edits a copy. */
  function doc(change: (d: any) => void = () => {}): any {
    const d: any = {
      name: 'gpu-worker',
      description: 'GPU workers of rack 12',
      image: { imageId: ids.image },
      disk: {
        target: { bySize: 'largest', minGiB: 100 },
        partitions: [
          { label: 'efi', sizeMiB: 512, filesystem: 'vfat', mount: '/boot/efi' },
          { label: 'swap', sizeMiB: 4096, filesystem: 'swap' },
          { label: 'var', sizeMiB: 20480, filesystem: 'xfs', mount: '/var' },
          { label: 'root', filesystem: 'ext4', mount: '/' },
        ],
      },
      userData: '#cloud-config\nruncmd:\n  - [touch, /run/profile-ran]\n',
      packages: ['htop', 'nvme-cli'],
      node: { poolId: ids.pool, labels: { rack: 'r12', 'example.com/gpu': 'h100' } },
      joinTokenRef: ids.secretRef,
      sshKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEx4mpleKeyMaterial0123456789abcdefABCDEF ops@example'],
    };
    change(d);
    return d;
  }

  async function rowCount() {
    const { rows } = await sql<{ n: string }>`select count(*) as n from compute.profiles`.execute(
      database.db,
    );
    return Number(rows[0]!.n);
  }

  beforeAll(async () => {
    database = await createTestDatabase(kind, 4);
    compute = await betterCompute(
      { database, iam: new TestBridge(), trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {} },
    );
    await compute.migrate();
    const site = await api('sites.create', { name: 'rack-12' });
    ids.pool = (
      await api('pools.create', { siteId: site.id, name: 'metal', class: 'gpu', driver: 'sim' })
    ).id;
    ids.archivedPool = (
      await api('pools.create', { siteId: site.id, name: 'old', class: 'gpu', driver: 'sim' })
    ).id;
    await api('pools.archive', { poolId: ids.archivedPool });
    const opsSite = await api('sites.create', { name: 'ops-site' }, OPS);
    ids.offeredPool = (
      await api('pools.create', { siteId: opsSite.id, name: 'shared', class: 'gpu', driver: 'sim' }, OPS)
    ).id;
    await api('pools.offer', { poolId: ids.offeredPool, offerTenantId: 'acme' }, OPS);
    const globexSite = await api('sites.create', { name: 'globex-site' }, GLOBEX);
    ids.globexPool = (
      await api('pools.create', { siteId: globexSite.id, name: 'gx', class: 'gpu', driver: 'sim' }, GLOBEX)
    ).id;
    const image = (name: string, digit: string, token: string) =>
      api(
        'images.register',
        {
          name,
          source: token === OPS ? `/var/lib/images/${name}.raw` : `https://images.example.com/${name}.raw`,
          diskFormat: 'raw',
          sha256: digit.repeat(64),
          sizeBytes: 1 << 30,
          os: 'debian-12',
          channel: 'stable',
        },
        token,
      );
    ids.image = (await image('tiny', 'a', ACME)).id;
    ids.platformImage = (await image('debian-12', 'b', OPS)).id;
    ids.globexImage = (await image('gx-image', 'c', GLOBEX)).id;
    ids.secretRef = (await api('secrets.put', { name: 'join', value: TOKEN })).reference;
    ids.globexSecretRef = (await api('secrets.put', { name: 'join', value: TOKEN }, GLOBEX)).reference;
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
    rmSync(work, { recursive: true, force: true });
  });

  let profileId = '';

  it('validate checks a document without storing it and names what it resolved', async () => {
    const answer = await api('profiles.validate', { document: doc() });
    expect(answer).toEqual({
      valid: true,
      name: 'gpu-worker',
      documentSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      pool: { id: ids.pool, name: 'metal' },
      image: { id: ids.image, name: 'tiny', sha256: 'a'.repeat(64) },
      joinTokenSecret: { id: ids.secretRef.split('/').at(-1) },
      existing: null,
    });
    // The platform's image by name, pinned to its digest.
    const byName = await api('profiles.validate', {
      document: doc((d) => (d.image = { name: 'debian-12', digest: `sha256:${'b'.repeat(64)}` })),
    });
    expect(byName.image).toEqual({ id: ids.platformImage, name: 'debian-12', sha256: 'b'.repeat(64) });
    expect(await rowCount()).toBe(0);
  });

  it('create stores version 1 with its event and audit entry; get and list show it', async () => {
    const created = await api('profiles.create', { document: doc(), idempotencyKey: 'create-gpu-worker' });
    profileId = created.id;
    expect(created).toEqual({
      id: expect.stringMatching(/^prof_/),
      tenantId: 'acme',
      name: 'gpu-worker',
      version: 1,
      documentSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      document: doc(),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    // A retry with the same key answers the first call's answer; the name cannot be taken twice.
    expect(await api('profiles.create', { document: doc(), idempotencyKey: 'create-gpu-worker' })).toEqual(
      created,
    );
    const again = await fails('profiles.create', { document: doc() });
    expect(again.code).toBe('ALREADY_EXISTS');
    expect(again.message).toContain('gpu-worker');
    expect(await api('profiles.get', { profileId })).toEqual(created);
    expect(await api('profiles.get', { name: 'gpu-worker' })).toEqual(created);
    const listed = await api('profiles.list', {});
    expect(listed).toEqual({
      items: [
        {
          id: profileId,
          tenantId: 'acme',
          name: 'gpu-worker',
          version: 1,
          poolId: ids.pool,
          image: ids.image,
          documentSha256: created.documentSha256,
          updatedAt: created.updatedAt,
        },
      ],
      nextCursor: null,
    });
    expect((await api('profiles.list', { poolId: ids.offeredPool })).items).toEqual([]);
    expect((await api('profiles.validate', { document: doc() })).existing).toEqual({
      id: profileId,
      version: 1,
    });
    const events = await eventually(
      () => api('events.list', { type: 'profile.' }),
      (page) => page.items.length > 0,
    );
    expect(events.items.map((e: any) => [e.type, e.subject.id, e.data.version])).toEqual([
      ['profile.created', profileId, 1],
    ]);
    const audit = await database.db
      .selectFrom('compute.audit_events')
      .select(['method', 'outcome', 'action'])
      .where('method', '=', 'profiles.create')
      .execute();
    expect(audit).toContainEqual({
      method: 'profiles.create',
      outcome: 'allowed',
      action: 'compute:profiles:write',
    });
  });

  it('update replaces the document as a new version, only at the version asked for', async () => {
    const changed = doc((d) => {
      d.packages = ['htop'];
      d.node.labels = { rack: 'r13' };
    });
    const stale = await fails('profiles.update', { profileId, document: changed, ifVersion: 2 });
    expect(stale.code).toBe('CONFLICT');
    const updated = await api('profiles.update', { name: 'gpu-worker', document: changed, ifVersion: 1 });
    expect(updated).toMatchObject({ id: profileId, version: 2, document: changed });
    expect((await fails('profiles.update', { profileId, document: changed, ifVersion: 1 })).code).toBe(
      'CONFLICT',
    );
    // Renamed to a name another profile holds: ALREADY_EXISTS, and nothing changed.
    await api('profiles.create', { document: doc((d) => (d.name = 'spare')) });
    const taken = await fails('profiles.update', { profileId, document: doc((d) => (d.name = 'spare')) });
    expect(taken.code).toBe('ALREADY_EXISTS');
    expect((await api('profiles.get', { profileId })).version).toBe(2);
    const events = await eventually(
      () => api('events.list', { type: 'profile.updated' }),
      (page) => page.items.length > 0,
    );
    expect(events.items.map((e: any) => e.data.version)).toEqual([2]);
  });

  it('render answers the same bytes every time, each file in the manifest with its digest', async () => {
    const first = await api('profiles.render', { profileId });
    const second = await api('profiles.render', { name: 'gpu-worker' });
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    expect(first.files.map((f: any) => [f.path, f.mode])).toEqual([
      ['bcd/join.json', '0644'],
      ['cloud-init/meta-data', '0644'],
      ['cloud-init/user-data', '0600'],
      ['disk/layout.sfdisk', '0644'],
      ['disk/partition.sh', '0755'],
      ['etc/fstab', '0644'],
      ['image.json', '0644'],
      ['manifest.json', '0644'],
    ]);
    const files = Object.fromEntries(first.files.map((f: any) => [f.path, f.content])) as Record<
      string,
      string
    >;
    for (const f of first.files) {
      expect(f.sha256).toBe(sha256(f.content));
      expect(f.bytes).toBe(Buffer.byteLength(f.content));
    }
    const manifest = JSON.parse(files['manifest.json']!);
    expect(first.manifestSha256).toBe(sha256(files['manifest.json']!));
    expect(manifest).toEqual({
      files: first.files
        .filter((f: any) => f.path !== 'manifest.json')
        .map(({ path, mode, bytes, sha256: hash }: any) => ({ bytes, mode, path, sha256: hash })),
      format: 'better-compute.profile-render/v1',
      profile: { documentSha256: first.documentSha256, id: profileId, name: 'gpu-worker', version: 2 },
    });
    expect(files['disk/layout.sfdisk']).toBe(
      [
        `# Rendered by better-compute from profile gpu-worker (${profileId} version 2); re-render rather than edit.`,
        'label: gpt',
        '',
        'size=512MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="efi"',
        'size=4096MiB, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap"',
        'size=20480MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="var"',
        'type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name="root"',
        '',
      ].join('\n'),
    );
    expect(files['etc/fstab']!.split('\n').slice(1)).toEqual([
      'PARTLABEL=root / ext4 defaults,errors=remount-ro 0 1',
      'PARTLABEL=var /var xfs defaults 0 2',
      'PARTLABEL=efi /boot/efi vfat umask=0077 0 2',
      'PARTLABEL=swap none swap sw 0 0',
      '',
    ]);
    expect(JSON.parse(files['bcd/join.json']!)).toEqual({
      joinToken: { file: '/etc/better-compute/join-token', reference: ids.secretRef },
      labels: { rack: 'r13' },
      poolId: ids.pool,
      tenantId: 'acme',
    });
    expect(files['cloud-init/meta-data']).toBe(`instance-id: ${profileId}-v2\n`);
    const userData = files['cloud-init/user-data']!;
    expect(userData).toMatch(/^Content-Type: multipart\/mixed; boundary="==bc-[0-9a-f]{32}=="\n/);
    expect(userData).toContain(
      '#cloud-config\n{"package_update":true,"packages":["htop"],"ssh_authorized_keys":["ssh-ed25519 ',
    );
    expect(userData).toContain('Merge-Type: list(append)+dict(recurse_array)+str()');
    expect(userData).toContain('#cloud-config\nruncmd:\n  - [touch, /run/profile-ran]\n');
    expect(JSON.parse(files['image.json']!)).toMatchObject({
      id: ids.image,
      sha256: 'a'.repeat(64),
      writeTo: 'PARTLABEL=root',
    });
    // The join token's value is in no file.
    expect(JSON.stringify(first)).not.toContain(TOKEN);

    // A document that is not stored renders the same way, named as not stored.
    const unsaved = await api('profiles.render', { document: doc() });
    expect(unsaved.profileId).toBeNull();
    expect(JSON.stringify(await api('profiles.render', { document: doc() }))).toBe(JSON.stringify(unsaved));
    expect(unsaved.files.find((f: any) => f.path === 'cloud-init/meta-data').content).toBe(
      `instance-id: profile-${unsaved.documentSha256.slice(0, 16)}\n`,
    );
  });

  it.skipIf(!hasPyYaml)('cloud-init’s files read as cloud-init reads them: MIME parts, YAML', async () => {
    const rendered = await api('profiles.render', { profileId });
    const files = Object.fromEntries(rendered.files.map((f: any) => [f.path, f.content])) as Record<
      string,
      string
    >;
    writeFileSync(join(work, 'user-data'), files['cloud-init/user-data']!);
    writeFileSync(join(work, 'meta-data'), files['cloud-init/meta-data']!);
    // Python's email parser and PyYAML's safe_load, which cloud-init reads user data with.
    const read = spawnSync(
      'python3',
      [
        '-c',
        [
          'import email, json, sys, yaml',
          'msg = email.message_from_string(open(sys.argv[1]).read())',
          'parts = [(p.get_content_type(), p.get("Merge-Type"), yaml.safe_load(p.get_payload(decode=True).decode()))',
          '         for p in msg.walk() if not p.is_multipart()]',
          'print(json.dumps({"parts": parts, "meta": yaml.safe_load(open(sys.argv[2]))}))',
        ].join('\n'),
        join(work, 'user-data'),
        join(work, 'meta-data'),
      ],
      { encoding: 'utf8' },
    );
    expect(read.status, read.stderr).toBe(0);
    const parsed = JSON.parse(read.stdout);
    expect(parsed.meta).toEqual({ 'instance-id': `${profileId}-v2` });
    expect(parsed.parts).toEqual([
      [
        'text/cloud-config',
        'list(append)+dict(recurse_array)+str()',
        { package_update: true, packages: ['htop'], ssh_authorized_keys: doc().sshKeys },
      ],
      [
        'text/cloud-config',
        'list(append)+dict(recurse_array)+str()',
        { runcmd: [['touch', '/run/profile-ran']] },
      ],
    ]);
  });

  it('the rendered script is one sh reads', async () => {
    const rendered = await api('profiles.render', { profileId });
    const files = Object.fromEntries(rendered.files.map((f: any) => [f.path, f.content])) as Record<
      string,
      string
    >;
    const script = join(work, 'partition.sh');
    writeFileSync(script, files['disk/partition.sh']!);
    expect(spawnSync('sh', ['-n', script]).status).toBe(0);
    expect(files['disk/partition.sh']).toContain('sort -k2,2nr -k1,1 | head -n 1');
    expect(files['disk/partition.sh']).toContain('mkfs.vfat -F 32 -n EFI "${PART}1" >&2');
    expect(files['disk/partition.sh']).toContain('mkfs.ext4 -F -q -L root "${PART}4" >&2');
  });

  it('the size rule picks the disk it says among lsblk’s, and --which-disk changes nothing', async () => {
    // A stand-in lsblk on PATH, answering as `lsblk -dbnp -o NAME,SIZE,TYPE,RO` does on a machine
    // with a 500 GiB disk, two 2 TiB ones, a read-only 2 TiB one, a 1 TiB NVMe drive and a CD.
    const bin = join(work, 'fake-bin');
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(
      join(bin, 'lsblk'),
      [
        '#!/bin/sh',
        "cat <<'EOF'",
        '/dev/sdd      2199023255552 disk  0',
        '/dev/sda       536870912000 disk  0',
        '/dev/sdc      2199023255552 disk  1',
        '/dev/nvme0n1  1099511627776 disk  0',
        '/dev/sr0         1073741824 rom   0',
        '/dev/sdb      2199023255552 disk  0',
        'EOF',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const pick = async (target: Record<string, unknown>) => {
      const rendered = await api('profiles.render', { document: doc((d) => (d.disk.target = target)) });
      const script = join(work, 'which.sh');
      writeFileSync(script, rendered.files.find((f: any) => f.path === 'disk/partition.sh').content);
      const run = spawnSync('sh', [script, '--which-disk'], {
        encoding: 'utf8',
        env: { PATH: `${bin}:${process.env.PATH}` },
      });
      return run.status === 0 ? run.stdout.trim() : `exit ${run.status}: ${run.stderr.trim()}`;
    };
    expect(await pick({ bySize: 'largest', minGiB: 100 })).toBe('/dev/sdb');
    expect(await pick({ bySize: 'smallest', minGiB: 100 })).toBe('/dev/sda');
    expect(await pick({ bySize: 'smallest', minGiB: 600 })).toBe('/dev/nvme0n1');
    expect(await pick({ bySize: 'largest', maxGiB: 1500 })).toBe('/dev/nvme0n1');
    expect(await pick({ bySize: 'smallest', minGiB: 100, maxGiB: 400 })).toBe(
      "exit 1: partition.sh: no disk matches the profile's rule (smallest, 100-400 GiB)",
    );
  });

  it('an unknown field anywhere is refused with its path, and nothing is stored', async () => {
    const before = await rowCount();
    const cases: [string, (d: any) => void, string][] = [
      ['top', (d) => (d.colour = 'blue'), 'document: Unrecognized key: "colour"'],
      ['disk', (d) => (d.disk.wipe = true), 'document.disk: Unrecognized key: "wipe"'],
      [
        'partition',
        (d) => (d.disk.partitions[1].fstype = 'ext4'),
        'document.disk.partitions.1: Unrecognized key: "fstype"',
      ],
      ['target', (d) => (d.disk.target.serial = 'x'), 'document.disk.target: Unrecognized key: "serial"'],
      ['node', (d) => (d.node.pool = 'x'), 'document.node: Unrecognized key: "pool"'],
      ['image', (d) => (d.image.url = 'http://x'), 'document.image: Unrecognized key: "url"'],
    ];
    for (const [, change, message] of cases) {
      for (const method of ['profiles.create', 'profiles.validate']) {
        const refused = await fails(method, {
          document: doc((d) => {
            d.name = 'bad';
            change(d);
          }),
        });
        expect(refused.code, message).toBe('INVALID_ARGUMENT');
        expect(refused.message).toBe(message);
      }
    }
    const layout: [(d: any) => void, string][] = [
      [
        (d) => (d.disk.partitions[3].mount = '/var'),
        'document.disk.partitions.3.mount: /var is mounted twice',
      ],
      [
        (d) => delete d.disk.partitions[3].mount,
        'document.disk.partitions: one partition must be mounted at /',
      ],
      [
        (d) => delete d.disk.partitions[0].sizeMiB,
        'document.disk.partitions.0.sizeMiB: only the last partition may leave sizeMiB out',
      ],
      [
        (d) => (d.disk.partitions[1].mount = '/swap'),
        'document.disk.partitions.1.mount: a swap partition is not mounted',
      ],
      [
        (d) => (d.disk.partitions[2].mount = '/var/../etc'),
        'document.disk.partitions.2.mount: must be an absolute path',
      ],
      [
        (d) => (d.disk.target = { path: '/dev/sda', bySize: 'largest' }),
        'document.disk.target.path: give exactly one of path and bySize',
      ],
      [
        (d) => (d.disk.target = { path: '/dev/../etc/passwd' }),
        'document.disk.target.path: must be a device path',
      ],
      [(d) => (d.image = { name: 'tiny' }), 'document.image.digest: give imageId, or both name and digest'],
      [(d) => (d.userData = 'runcmd: []'), 'document.userData: must be a cloud-config document'],
      [
        (d) => (d.sshKeys = ['ssh-ed25519 AAAA\nssh-rsa BBBB']),
        'document.sshKeys.0: must be one OpenSSH public key line',
      ],
      [(d) => (d.joinTokenRef = TOKEN), 'document.joinTokenRef: must be a secret reference'],
      [(d) => (d.packages = ['htop', 'htop']), 'document.packages: must not name a package twice'],
    ];
    for (const [change, message] of layout) {
      const refused = await fails('profiles.create', {
        document: doc((d) => {
          d.name = 'bad';
          change(d);
        }),
      });
      expect(refused.code, message).toBe('INVALID_ARGUMENT');
      expect(refused.message.startsWith(message), refused.message).toBe(true);
    }
    expect(await rowCount()).toBe(before);
  });

  it('another tenant’s pool, image or secret, an offered or archived pool: refused by field, nothing stored', async () => {
    const before = await rowCount();
    const cases: [(d: any) => void, string, string][] = [
      [(d) => (d.node.poolId = ids.globexPool), 'NOT_FOUND', 'document.node.poolId: pool'],
      [(d) => (d.node.poolId = ids.offeredPool), 'ACCESS_DENIED', 'document.node.poolId: pool'],
      [(d) => (d.node.poolId = ids.archivedPool), 'INVALID_STATE', 'document.node.poolId: pool'],
      [(d) => (d.image = { imageId: ids.globexImage }), 'NOT_FOUND', 'document.image.imageId: image'],
      [
        (d) => (d.image = { name: 'gx-image', digest: `sha256:${'c'.repeat(64)}` }),
        'NOT_FOUND',
        'document.image.name:',
      ],
      [
        (d) => (d.image = { name: 'tiny', digest: `sha256:${'f'.repeat(64)}` }),
        'INVALID_ARGUMENT',
        'document.image.digest: image tiny has digest',
      ],
      [
        (d) => (d.joinTokenRef = ids.globexSecretRef),
        'INVALID_ARGUMENT',
        'document.joinTokenRef: names a secret of another tenant',
      ],
      [
        (d) => (d.joinTokenRef = 'secret://acme/sec_01k00000000000000000000000'),
        'NOT_FOUND',
        'document.joinTokenRef: secret',
      ],
    ];
    for (const [change, code, message] of cases) {
      for (const method of ['profiles.validate', 'profiles.create', 'profiles.render']) {
        const refused = await fails(method, {
          document: doc((d) => {
            d.name = 'other';
            change(d);
          }),
        });
        expect([refused.code, refused.message.startsWith(message)], `${method} ${refused.message}`).toEqual([
          code,
          true,
        ]);
      }
    }
    // globex cannot see, render, change or delete acme's profile.
    for (const [method, body] of [
      ['profiles.get', { profileId }],
      ['profiles.render', { profileId }],
      [
        'profiles.update',
        {
          profileId,
          document: doc((d) => {
            d.node.poolId = ids.globexPool;
            d.joinTokenRef = ids.globexSecretRef;
            d.image = { imageId: ids.globexImage };
          }),
        },
      ],
      ['profiles.delete', { profileId }],
      ['profiles.get', { name: 'gpu-worker' }],
    ] as const) {
      expect((await fails(method, body, GLOBEX)).code, method).toBe('NOT_FOUND');
    }
    expect((await api('profiles.list', {}, GLOBEX)).items).toEqual([]);
    // A tenantId naming acme, with globex's credential: refused before anything is read.
    expect((await fails('profiles.get', { tenantId: 'acme', profileId }, GLOBEX)).code).toBe('ACCESS_DENIED');
    expect(await rowCount()).toBe(before);
    expect((await api('profiles.get', { profileId })).version).toBe(2);
  });

  it('NUL bytes and a huge document are refused without a 5xx, and nothing is stored', async () => {
    const before = await rowCount();
    const nul = await fails('profiles.create', {
      document: doc((d) => (d.userData = '#cloud-config\nx: "\u0000"\n')),
    });
    expect(nul.code).toBe('INVALID_ARGUMENT');
    expect(nul.message).toContain('document.userData');
    const nulKey = await fails('profiles.create', {
      document: doc((d) => (d.node.labels = { 'a\u0000': 'b' })),
    });
    expect(nulKey.code).toBe('INVALID_ARGUMENT');
    const bigUserData = await fails('profiles.create', {
      document: doc((d) => (d.userData = `#cloud-config\n# ${'x'.repeat(40_000)}\n`)),
    });
    expect(bigUserData.code).toBe('INVALID_ARGUMENT');
    expect(bigUserData.message).toContain('document.userData: must be at most 32768 bytes');
    const huge = await fails('profiles.create', {
      document: doc((d) => (d.description = 'x'.repeat(200_000))),
    });
    expect(huge.code).toBe('PAYLOAD_TOO_LARGE');
    const many = await fails('profiles.create', {
      document: doc((d) => (d.packages = Array.from({ length: 201 }, (_, i) => `pkg${i}`))),
    });
    expect(many.message).toContain('document.packages: must name at most 200 packages');
    expect(await rowCount()).toBe(before);
  });

  it('a profile a deploying or active machine uses is not deleted; delete honours --if-version', async () => {
    // The seam the metal module fills, called here in a transaction as the handler would.
    const inUse = deleteProfile(async (_db, tenantId, id) =>
      tenantId === 'acme' && id === profileId
        ? { machineId: 'node_01k00000000000000000000000', state: 'active' }
        : null,
    );
    const emitted: unknown[] = [];
    const refused = await database.db
      .transaction()
      .execute((trx: Kysely<any>) =>
        inUse({
          input: { profileId },
          identity: null,
          tenantId: 'acme',
          requestId: 'req_test',
          db: trx,
          emit: (event) => emitted.push(event),
          now: () => new Date(),
          tenantExists: async () => true,
          routes: () => [],
        } as CallContext<{ profileId: string }>),
      )
      .catch((error) => error);
    expect(refused.code).toBe('INVALID_STATE');
    expect(refused.message).toBe(
      'profile gpu-worker is in use: machine node_01k00000000000000000000000 is active with it',
    );
    expect(emitted).toEqual([]);
    expect((await api('profiles.get', { profileId })).version).toBe(2);

    expect((await fails('profiles.delete', { profileId, ifVersion: 1 })).code).toBe('CONFLICT');
    expect(await api('profiles.delete', { name: 'gpu-worker', ifVersion: 2 })).toEqual({
      id: profileId,
      name: 'gpu-worker',
      deleted: true,
    });
    expect((await fails('profiles.get', { profileId })).code).toBe('NOT_FOUND');
    expect((await fails('profiles.render', { profileId })).code).toBe('NOT_FOUND');
    const events = await eventually(
      () => api('events.list', { type: 'profile.deleted' }),
      (page) => page.items.length > 0,
    );
    expect(events.items.map((e: any) => [e.subject.id, e.data.version])).toEqual([[profileId, 2]]);
  });

  it('profileForDeploy reads a stored document for the metal module, the tenant’s own only', async () => {
    const spare = await api('profiles.get', { name: 'spare' });
    const read = await database.db
      .transaction()
      .execute((trx: Kysely<any>) => profileForDeploy(trx, 'acme', { name: 'spare' }));
    expect(read).toEqual({
      id: spare.id,
      version: 1,
      document: spare.document,
      documentSha256: spare.documentSha256,
    });
    const foreign = await profileForDeploy(database.db, 'globex', { profileId: spare.id }).catch((e) => e);
    expect(foreign.code).toBe('NOT_FOUND');
  });

  it('the join token’s value is in no event or audit entry', async () => {
    const events = await database.db.selectFrom('compute.events').selectAll().execute();
    const audit = await database.db.selectFrom('compute.audit_events').selectAll().execute();
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    expect(JSON.stringify(audit)).not.toContain(TOKEN);
  });
});

describe('who may write profiles, decided by the real embedded Better IAM', () => {
  let database: TestDatabase;
  let compute: ComputeInstance;
  const keys = {} as Record<'admin' | 'member' | 'operator' | 'writer' | 'writerWithSecrets', string>;
  let document: Record<string, unknown>;

  async function as(token: string, method: string, body: Record<string, unknown>) {
    const { status, body: answer } = await call(compute, method, body, { token });
    expect(status).toBeLessThan(500);
    return answer;
  }

  beforeAll(async () => {
    database = await createTestDatabase(kinds.at(-1)!, 4);
    compute = await betterCompute(
      { database, trustedOrigins: [], rateLimit: false, secret: SECRET },
      { log: () => {} },
    );
    await compute.migrate();
    const iam = compute.embeddedIam!;
    const dev = (await iam.bootstrapDev())!;
    keys.admin = dev.acmeAdmin.apiKey;
    keys.member = dev.acmeMember.apiKey;
    const person = async (email: string, role: string) => {
      const principal = await iam.createPerson({ tenantId: 'acme', email });
      await iam.createBinding({ tenantId: 'acme', role, principalId: principal.id });
      return (await iam.createApiKey(principal.id, { name: email })).key;
    };
    keys.operator = await person('ops@acme.test', 'operator');
    // Profiles, but not the secrets they name; and the same with compute:secrets:use.
    await iam.createRole({
      tenantId: 'acme',
      name: 'profile-writer',
      actions: ['compute:profiles:*', 'compute:*:read'],
    });
    await iam.createRole({
      tenantId: 'acme',
      name: 'profile-writer-secrets',
      actions: ['compute:profiles:*', 'compute:secrets:use', 'compute:*:read'],
    });
    keys.writer = await person('writer@acme.test', 'profile-writer');
    keys.writerWithSecrets = await person('writer2@acme.test', 'profile-writer-secrets');
    const data = async (method: string, body: Record<string, unknown>) => {
      const answer = await as(keys.admin, method, body);
      if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
      return answer.data as any;
    };
    const site = await data('sites.create', { name: 'iam-site' });
    const pool = await data('pools.create', {
      siteId: site.id,
      name: 'iam-pool',
      class: 'gpu',
      driver: 'sim',
    });
    const image = await data('images.register', {
      name: 'iam-os',
      source: 'https://images.example.com/iam-os.raw',
      diskFormat: 'raw',
      sha256: 'e'.repeat(64),
      sizeBytes: 4096,
      os: 'debian-12',
      channel: 'stable',
    });
    const secret = await data('secrets.put', { name: 'join', value: TOKEN });
    document = {
      name: 'iam-profile',
      image: { imageId: image.id },
      disk: { target: { path: '/dev/sda' }, partitions: [{ label: 'root', filesystem: 'ext4', mount: '/' }] },
      node: { poolId: pool.id },
      joinTokenRef: secret.reference,
    };
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  it('every role reads, validates and renders; members, viewers and operators do not write', async () => {
    for (const key of [keys.member, keys.operator, keys.writer]) {
      expect((await as(key, 'profiles.validate', { document })).data).toMatchObject({ valid: true });
      expect((await as(key, 'profiles.render', { document })).data).toMatchObject({ profileId: null });
    }
    for (const key of [keys.member, keys.operator])
      expect((await as(key, 'profiles.create', { document })).error?.code).toBe('ACCESS_DENIED');
  });

  it('naming a join token secret needs compute:secrets:use on it, beside compute:profiles:write', async () => {
    const denied = await as(keys.writer, 'profiles.create', { document });
    expect(denied.error?.code).toBe('ACCESS_DENIED');
    const created = await as(keys.writerWithSecrets, 'profiles.create', { document });
    expect(created.data).toMatchObject({ name: 'iam-profile', version: 1 });
    const id = (created.data as { id: string }).id;
    // Without secrets:use, not even an update that keeps the same reference.
    expect((await as(keys.writer, 'profiles.update', { profileId: id, document })).error?.code).toBe(
      'ACCESS_DENIED',
    );
    // Deleting names no secret: profiles:write is enough.
    expect((await as(keys.writer, 'profiles.delete', { profileId: id })).data).toMatchObject({
      deleted: true,
    });
  });
});
