/**
 * Images, flavors and instances through the real binary against `dev --memory --sim 2` (every
 * role, the embedded Better IAM, a simulated VPS pool whose commands run in the sim runtime):
 * register and promote an image, flavor CRUD with the in-use refusal, an instance's whole life
 * (create with --ssh-key and --user-data files, --key retried, stop, resize, start, delete) with the
 * state and events at each step, a member's ACCESS_DENIED, and usage mistakes refused before
 * anything is sent.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DevServer,
  type RunResult,
  type RunningServer,
  runCompute,
  startDev,
} from '../../../test/e2e/support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-instances-'));
let server: RunningServer | undefined;
let url = '';
let dev: DevServer['dev'];

function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return runCompute(args, { cwd: work, url, token });
}

/** The JSON answer of a command that must succeed. */
async function json<T = any>(args: string[], token?: string): Promise<T> {
  const result = await compute([...args, '--format', 'compact'], token);
  if (result.status !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

/** The error code a refused command prints (`CODE: message`). */
async function refusal(args: string[], token?: string): Promise<{ status: number | null; code: string }> {
  const result = await compute(args, token);
  expect(result.status).not.toBe(0);
  return { status: result.status, code: /^([A-Z_]+):/m.exec(result.stderr)?.[1] ?? result.stderr };
}

let poolId = '';
let imageId = '';
const disk = join(work, 'disk.raw');

beforeAll(async () => {
  ({ server, url, dev } = await startDev(work, ['--sim', '2'], {
    ready: /simulated VPS pool:[\s\S]*try: BETTER_COMPUTE_URL=\S+/,
    timeoutMs: 90_000,
  }));
  poolId = /simulated VPS pool: \d+ machine\(s\) in pool (pool_\w+)/.exec(server.output())![1]!;
  writeFileSync(disk, Buffer.alloc(4096, 7));
  writeFileSync(
    join(work, 'id.pub'),
    'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXJrZXlmb3J0ZXN0aW5nb25seTAwMDAwMDAwMDAw me@here\n',
  );
  writeFileSync(join(work, 'user-data'), '#cloud-config\nruncmd: [echo hello]\n');
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('images', () => {
  it('register hashes a local file, list shows it to acme as the platform’s, promote moves it', async () => {
    const image = await json(
      ['images', 'register', '--name', 'tiny', '--source', disk, '--disk-format', 'raw', '--os', 'debian-12'],
      dev.rootAdmin.apiKey,
    );
    imageId = image.id;
    expect(image).toMatchObject({
      scope: 'platform',
      channel: 'testing',
      sizeBytes: 4096,
      sha256: createHash('sha256').update(readFileSync(disk)).digest('hex'),
    });
    const listed = await compute(['images', 'list']);
    expect(listed.stdout).toContain('tiny');
    expect(listed.stdout).toContain('platform');
    expect((await compute(['images', 'list', '--name', 'tiny', '--query', 'items[].id'])).stdout.trim()).toBe(
      imageId,
    );
    expect((await refusal(['images', 'promote', imageId, '--channel', 'stable'])).code).toBe('ACCESS_DENIED');
    expect(
      (await json(['images', 'promote', imageId, '--channel', 'stable'], dev.rootAdmin.apiKey)).channel,
    ).toBe('stable');
    expect((await json(['images', 'get', imageId])).channel).toBe('stable');
    // A URL without the digest and size is refused before anything is sent.
    const bad = await refusal([
      'images',
      'register',
      '--name',
      'u',
      '--source',
      'https://x.example.com/d.raw',
      '--disk-format',
      'raw',
      '--os',
      'x',
    ]);
    expect(bad.code).toBe('INVALID_ARGUMENT');
    expect(
      (
        await refusal([
          'images',
          'register',
          '--name',
          'u',
          '--source',
          disk,
          '--disk-format',
          'vmdk',
          '--os',
          'x',
        ])
      ).status,
    ).toBe(2);
  });
});

describe('flavors and an instance’s life through the binary', () => {
  let small = '';
  let large = '';
  let instanceId = '';

  it('the pool’s owner creates and updates flavors; acme lists them and cannot change them', async () => {
    const root = dev.rootAdmin.apiKey;
    small = (
      await json(
        [
          'flavors',
          'create',
          '--pool',
          poolId,
          '--name',
          'small',
          '--vcpus',
          '1',
          '--memory',
          '512',
          '--disk',
          '4',
        ],
        root,
      )
    ).id;
    large = (
      await json(
        [
          'flavors',
          'create',
          '--pool',
          poolId,
          '--name',
          'large',
          '--vcpus',
          '2',
          '--memory',
          '1024',
          '--disk',
          '8',
        ],
        root,
      )
    ).id;
    expect(
      await json(['flavors', 'update', large, '--memory', '2048', '--if-version', '1'], root),
    ).toMatchObject({ memoryMiB: 2048, version: 2 });
    const table = await compute(['flavors', 'list', '--pool', poolId]);
    expect(table.stdout).toMatch(/small[\s\S]*large|large[\s\S]*small/);
    const byName = await compute([
      'flavors',
      'list',
      '--pool',
      poolId,
      '--name',
      'large',
      '--query',
      'items[].id',
    ]);
    expect(byName.stdout.trim()).toBe(large);
    expect(
      (
        await refusal([
          'flavors',
          'create',
          '--pool',
          poolId,
          '--name',
          'x',
          '--vcpus',
          '1',
          '--memory',
          '512',
          '--disk',
          '1',
        ])
      ).code,
    ).toBe('ACCESS_DENIED');
    expect((await refusal(['flavors', 'update', small])).code).toBe('INVALID_ARGUMENT');
  });

  it('create with --ssh-key and --user-data files waits until running; the same --key answers the same instance', async () => {
    const args = [
      'instances',
      'create',
      '--pool',
      poolId,
      '--flavor',
      small,
      '--image',
      imageId,
      '--name',
      'web-1',
      '--ssh-key',
      'id.pub',
      '--user-data',
      'user-data',
      '--key',
      'web-1-create-key',
    ];
    const created = await json([...args, '--wait', '60']);
    expect(created).toMatchObject({ name: 'web-1', state: 'running', vcpus: 1, memoryMiB: 512, diskGiB: 4 });
    // Egress is on unless --no-egress takes it away; it is kept with the instance.
    expect(created.egress).toBe(true);
    instanceId = created.id;
    const closed = await json([
      'instances', 'create', '--pool', poolId, '--flavor', small, '--image', imageId, '--name', 'closed-1',
      '--no-egress', '--wait', '60',
    ]); // prettier-ignore
    expect(closed).toMatchObject({ state: 'running', egress: false });
    expect((await json(['instances', 'get', closed.id])).egress).toBe(false);
    expect((await json(['instances', 'delete', closed.id, '--wait', '60'])).state).toBe('deleted');
    const again = await json(args);
    expect(again.id).toBe(instanceId);
    expect(
      (
        await refusal([
          'instances',
          'create',
          '--pool',
          poolId,
          '--flavor',
          small,
          '--image',
          imageId,
          '--name',
          'web-1',
        ])
      ).code,
    ).toBe('ALREADY_EXISTS');
    expect(
      (
        await refusal([
          'instances',
          'create',
          '--pool',
          poolId,
          '--flavor',
          small,
          '--image',
          imageId,
          '--name',
          'web-2',
          '--ssh-key',
          'missing.pub',
        ])
      ).code,
    ).toBe('NOT_FOUND');
  });

  it('a member may read but not create or stop; a flavor in use is not deleted', async () => {
    expect((await json(['instances', 'get', instanceId], dev.acmeMember.apiKey)).state).toBe('running');
    expect((await refusal(['instances', 'stop', instanceId], dev.acmeMember.apiKey)).code).toBe(
      'ACCESS_DENIED',
    );
    expect((await refusal(['flavors', 'delete', small], dev.rootAdmin.apiKey)).code).toBe('CONFLICT');
  });

  it('stop, resize (disk only grows), start and delete, each waited for, with its events', async () => {
    expect((await json(['instances', 'stop', instanceId, '--timeout', '5', '--wait', '60'])).state).toBe(
      'stopped',
    );
    expect((await refusal(['instances', 'start', instanceId, '--if-version', '1'])).code).toBe('CONFLICT');
    const resized = await json(['instances', 'resize', instanceId, '--flavor', large, '--wait', '60']);
    expect(resized).toMatchObject({
      state: 'stopped',
      vcpus: 2,
      memoryMiB: 2048,
      diskGiB: 8,
      flavorId: large,
    });
    expect((await refusal(['instances', 'resize', instanceId, '--flavor', small])).code).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await json(['instances', 'start', instanceId, '--wait', '60'])).state).toBe('running');
    expect((await json(['instances', 'delete', instanceId, '--wait', '60'])).state).toBe('deleted');
    const events = await json(['events', 'list', '--type', 'instance.', '--limit', '100']);
    const mine = events.items.filter((e: { subject: { id: string } }) => e.subject.id === instanceId);
    expect(mine.map((e: { type: string }) => e.type)).toEqual([
      'instance.created',
      'instance.running',
      'instance.stopping',
      'instance.stopped',
      'instance.provisioning',
      'instance.resized',
      'instance.stopped',
      'instance.provisioning',
      'instance.running',
      'instance.deleting',
      'instance.deleted',
    ]);
    const listed = await compute(['instances', 'list', '--state', 'deleted']);
    expect(listed.stdout).toContain(instanceId);
    expect(await json(['flavors', 'delete', small], dev.rootAdmin.apiKey)).toEqual({
      id: small,
      deleted: true,
    });
  });

  it('the pool’s owner limits acme’s instances; a create past the limit is QUOTA_EXCEEDED', async () => {
    const root = dev.rootAdmin.apiKey;
    const set = await json(
      [
        'instances',
        'set-quota',
        '--pool',
        poolId,
        '--subject',
        'acme',
        '--resource',
        'instances',
        '--limit',
        '1',
      ],
      root,
    );
    expect(set).toMatchObject({ resource: 'instances', limit: 1, used: 0 });
    expect(
      (
        await refusal([
          'instances',
          'set-quota',
          '--pool',
          poolId,
          '--subject',
          'acme',
          '--resource',
          'vcpus',
          '--limit',
          '9',
        ])
      ).code,
    ).toBe('ACCESS_DENIED');
    const first = await json([
      'instances',
      'create',
      '--pool',
      poolId,
      '--flavor',
      large,
      '--image',
      imageId,
      '--name',
      'q-1',
    ]);
    expect(
      (
        await refusal([
          'instances',
          'create',
          '--pool',
          poolId,
          '--flavor',
          large,
          '--image',
          imageId,
          '--name',
          'q-2',
        ])
      ).code,
    ).toBe('QUOTA_EXCEEDED');
    const quotas = await json(['instances', 'quotas', '--pool', poolId]);
    expect(quotas.items.find((q: { resource: string }) => q.resource === 'instances')).toMatchObject({
      limit: 1,
      used: 1,
    });
    await json(
      [
        'instances',
        'set-quota',
        '--pool',
        poolId,
        '--subject',
        'acme',
        '--resource',
        'instances',
        '--limit',
        'none',
      ],
      root,
    );
    await json(['instances', 'delete', first.id, '--wait', '1']).catch(() => undefined);
  });

  it('usage mistakes exit 2 before anything is sent', async () => {
    expect(
      (
        await refusal([
          'instances',
          'create',
          '--pool',
          poolId,
          '--flavor',
          'img_x',
          '--image',
          imageId,
          '--name',
          'x',
        ])
      ).status,
    ).toBe(2);
    expect((await refusal(['instances', 'get', 'not-an-id'])).status).toBe(2);
    expect(
      (await refusal(['instances', 'stop', 'inst_01k5w0000000000000000000', '--timeout', '99999'])).status,
    ).toBe(2);
  });
});

describe('--wait tells the truth, and the rough edges a new user hit (issue 31)', () => {
  const root = () => dev.rootAdmin.apiKey;
  let tiny = '';
  let nodes: string[] = [];
  const FAIL = 'sim.better-compute.dev/fail';

  beforeAll(async () => {
    tiny = (
      await json(
        ['flavors', 'create', 'tiny', '--pool', poolId, '--vcpus', '1', '--memory', '256', '--disk', '1'],
        root(),
      )
    ).id;
    nodes = (await compute(['nodes', 'list', '--pool', poolId, '--query', 'items[].id'], root())).stdout
      .trim()
      .split('\n');
    expect(nodes.length).toBeGreaterThan(0);
  });

  it('create --wait prints each state with its time on stderr and only the instance on stdout; the name may be the argument', async () => {
    const created = await compute([
      'instances', 'create', 'waited-1', '--pool', poolId, '--flavor', tiny, '--image', imageId,
      '--wait', '60', '--format', 'compact',
    ]); // prettier-ignore
    expect(created.status, created.stderr).toBe(0);
    const lines = created.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    const instance = JSON.parse(lines[0]!);
    expect(instance).toMatchObject({ name: 'waited-1', state: 'running' });
    const progress = created.stderr.trimEnd().split('\n');
    expect(progress[0]).toMatch(/^idempotency key: cli-/);
    expect(progress[1]).toBe(`${instance.id}: provisioning (0.0 s); waiting up to 1m`);
    expect(progress.at(-1)).toMatch(new RegExp(`^${instance.id}: running \\(\\d+\\.\\d s\\)$`));
    expect(progress).toHaveLength(3);
    // The guide's --name and the argument together must agree.
    const both = await compute([
      'instances', 'create', 'waited-2', '--name', 'waited-3', '--pool', poolId, '--flavor', tiny,
      '--image', imageId,
    ]); // prettier-ignore
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/^INVALID_ARGUMENT: NAME is given twice/);
    const deleted = await compute(['instances', 'delete', instance.id, '--wait', '60', '--query', 'state']);
    expect(deleted.stdout.trim()).toBe('deleted');
    expect(deleted.stderr.trimEnd().split('\n')).toEqual([
      `${instance.id}: deleting (0.0 s); waiting up to 1m`,
      expect.stringMatching(new RegExp(`^${instance.id}: deleted \\(\\d+\\.\\d s\\)$`)),
    ]);
  });

  it('an instance that ends failed exits 1 with its reason; stdout still has the instance', async () => {
    for (const node of nodes) await json(['nodes', 'label', node, `${FAIL}=instance.start`], root());
    try {
      const created = await compute([
        'instances', 'create', '--name', 'doomed-1', '--pool', poolId, '--flavor', tiny, '--image', imageId,
        '--wait', '60', '--format', 'compact',
      ]); // prettier-ignore
      expect(created.status).toBe(1);
      const instance = JSON.parse(created.stdout.trim());
      expect(instance).toMatchObject({ name: 'doomed-1', state: 'failed' });
      const lines = created.stderr.trimEnd().split('\n');
      expect(lines[1]).toBe(`${instance.id}: provisioning (0.0 s); waiting up to 1m`);
      expect(lines[2]).toMatch(new RegExp(`^${instance.id}: failed \\(\\d+\\.\\d s\\)$`));
      expect(lines[3]).toMatch(
        new RegExp(
          `^RESOURCE_FAILED: instance ${instance.id} failed: .*simulated failure of instance\\.start`,
        ),
      );
      expect(lines[3]).toContain(instance.reason);
      expect(lines[4]).toBe(
        `hint: "better-compute instances get ${instance.id}" shows it; delete it (better-compute instances delete ${instance.id}) once the cause is fixed, and create it again.`,
      );
      expect(lines).toHaveLength(5);
      expect((await json(['instances', 'delete', instance.id, '--wait', '60'])).state).toBe('deleted');
    } finally {
      for (const node of nodes) await json(['nodes', 'label', node, '--remove', FAIL], root());
    }
  });

  it('sandbox create --wait follows a cold start on stderr, and a sandbox that fails to start exits 1 with its reason', async () => {
    const template = await json([
      'sandbox-template', 'create', 'cold', '--pool', poolId, '--flavor', 'tiny', '--image', imageId,
      '--warm-min', '0', '--warm-max', '0', '--max-ttl', '4h',
    ]); // prettier-ignore
    // The table prints the maximum lifetime as the guide writes durations.
    const table = await compute(['sandbox', 'templates', '--pool', poolId]);
    expect(table.stdout).toMatch(new RegExp(`${template.id}\\s.*\\s4h\\n?$`, 'm'));
    const started = await compute(['sandbox', 'create', '--template', template.id, '--format', 'compact']);
    expect(started.status, started.stderr).toBe(0);
    const sandbox = JSON.parse(started.stdout.trim());
    expect(sandbox).toMatchObject({ state: 'running', warm: false });
    expect(started.stderr.trimEnd().split('\n').slice(1)).toEqual([
      `${sandbox.id}: starting (0.0 s); waiting up to 30s`,
      expect.stringMatching(new RegExp(`^${sandbox.id}: running \\(\\d+\\.\\d s\\)$`)),
    ]);
    await compute(['sandbox', 'delete', sandbox.id]);

    for (const node of nodes) await json(['nodes', 'label', node, `${FAIL}=sandbox.create`], root());
    try {
      const failed = await compute(['sandbox', 'create', '--template', template.id, '--format', 'compact']);
      expect(failed.status).toBe(1);
      const answer = JSON.parse(failed.stdout.trim());
      expect(answer.state).toBe('failed');
      const lines = failed.stderr.trimEnd().split('\n');
      expect(lines[2]).toMatch(new RegExp(`^${answer.id}: failed \\(\\d+\\.\\d s\\)$`));
      expect(lines[3]).toMatch(
        new RegExp(`^RESOURCE_FAILED: sandbox ${answer.id} failed: .*sandbox\\.create`),
      );
      expect(lines[4]).toMatch(/^hint: "better-compute sandbox get sbx_\w+" shows it/);
    } finally {
      for (const node of nodes) await json(['nodes', 'label', node, '--remove', FAIL], root());
    }
    await json(['sandbox-template', 'delete', template.id]).catch(() => undefined);
  });

  it('a placement refusal names what is short on the nodes: vCPUs, not the GPUs of a flavor without any', async () => {
    const wide = (
      await json(
        [
          'flavors',
          'create',
          '--name',
          'wide',
          '--pool',
          poolId,
          '--vcpus',
          '200',
          '--memory',
          '256',
          '--disk',
          '1',
        ],
        root(),
      )
    ).id;
    const refused = await compute([
      'instances', 'create', '--name', 'wide-1', '--pool', poolId, '--flavor', wide, '--image', imageId,
    ]); // prettier-ignore
    expect(refused.status).toBe(1);
    const message = refused.stderr.split('\n').find((line) => line.startsWith('UNAVAILABLE: '));
    expect(message).toMatch(
      new RegExp(
        `^UNAVAILABLE: no ready node of pool ${poolId} has room for 200 vCPU\\(s\\) and 256 MiB of memory: short of vCPUs \\(the most free on one node: \\d+ vCPU\\(s\\), \\d+ MiB of memory\\)$`,
      ),
    );
    expect(refused.stderr).not.toContain('GPU');
    expect(refused.stderr).toContain('hint: Pick a flavor with fewer vCPUs');
    await json(['flavors', 'delete', wide], root());
  });
});
