/**
 * The guide's Sandboxes, Sandbox templates and Sandbox volumes flows through the real binary and
 * the real server on `dev --memory --sim 2`, whose VPS pool's commands run in the sim runtime (a
 * real Ed25519 host key per sandbox, so host certificates are real): template CRUD and its
 * refusals, a warm pool that fills, is claimed (`warm: true`) and refills, a cold create that
 * reaches running with a host certificate, extend limits, expiry, delete, a kept snapshot that
 * outlives its sandbox, volumes that only grow and cannot be deleted while mounted, the exec grant
 * (its certificate read back with ssh-keygen -L) and its refusal for API keys, another tenant's
 * NOT_FOUND on every id, and junk input that never gets a 5xx.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// Each test runs the CLI a dozen times or more, each a new process: a loaded machine needs minutes.
vi.setConfig({ testTimeout: 120_000 });
import {
  computeBin,
  type DevServer,
  type RunResult,
  type RunningServer,
  runCompute,
  startDev,
} from './support.js';

const work = mkdtempSync(join(tmpdir(), 'bc-sandboxes-'));
const secret = 'sandboxes-e2e-secret-0123456789abcdefghij';
let server: RunningServer | undefined;
let url = '';
let dev: DevServer['dev'];
let poolId = '';
let flavorId = '';
let imageId = '';

function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return runCompute(args, { cwd: work, url, token, timeoutMs: 45_000 });
}

async function json<T = any>(args: string[], token?: string): Promise<T> {
  const result = await compute([...args, '--format', 'compact'], token);
  if (result.status !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

/** The exit status and error code of a refused command (`CODE: message`), with its whole stderr. */
async function refusal(args: string[], token?: string) {
  const result = await compute(args, token);
  expect(result.status).not.toBe(0);
  return {
    status: result.status,
    code: /^([A-Z_]+):/m.exec(result.stderr)?.[1] ?? result.stderr,
    stderr: result.stderr,
  };
}

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, ms = 20_000) {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time; last ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
    value = await read();
  }
  return value;
}

async function sessionToken(account: { email: string; password: string }, tenantId: string) {
  const response = await fetch(`${url}/api/iam/sessions/signIn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: account.email, password: account.password, tenantId }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: { token: string } }).data.token;
}

let expiringId = '';

beforeAll(async () => {
  const pki = join(work, 'pki.json');
  const init = spawnSync(process.execPath, [computeBin, 'pki', 'init', '--pki', pki], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '', HOME: work, BETTER_COMPUTE_SECRET: secret },
    encoding: 'utf8',
  });
  expect(init.status, init.stderr).toBe(0);
  writeFileSync(
    join(work, 'better-compute.config.mjs'),
    `export default ${JSON.stringify({ database: 'pglite:memory', pki, secret })};\n`,
  );
  ({ server, url, dev } = await startDev(work, ['--sim', '2'], {
    ready: /simulated VPS pool:[\s\S]*try: BETTER_COMPUTE_URL=\S+/,
    timeoutMs: 90_000,
  }));
  poolId = /simulated VPS pool: \d+ machine\(s\) in pool (pool_\w+)/.exec(server.output())![1]!;
  writeFileSync(join(work, 'disk.raw'), Buffer.alloc(4096, 3));
  flavorId = (
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
        '2',
      ],
      dev.rootAdmin.apiKey,
    )
  ).id;
  imageId = (
    await json(
      [
        'images',
        'register',
        '--name',
        'tiny',
        '--source',
        join(work, 'disk.raw'),
        '--disk-format',
        'raw',
        '--os',
        'debian-12',
      ],
      dev.rootAdmin.apiKey,
    )
  ).id;
  // Started first, so its one-minute lifetime runs out while the other tests run.
  const shortLived = await json([
    'sandbox-template',
    'create',
    '--name',
    'short',
    '--pool',
    poolId,
    '--flavor',
    'small',
    '--image',
    imageId,
  ]);
  expiringId = (await json(['sandbox', 'create', '--template', shortLived.id, '--ttl', '1m', '--wait', '10']))
    .id;
}, 150_000);

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('sandbox templates', () => {
  it('creates with a flavor by name, defaults warm.max to warm.min, and lists the warm pool', async () => {
    const template = await json([
      'sandbox-template',
      'create',
      '--name',
      'python',
      '--pool',
      poolId,
      '--flavor',
      'small',
      '--image',
      imageId,
      '--warm-min',
      '2',
      '--max-ttl',
      '4h',
      '--default-ttl',
      '30m',
      '--network',
      'private',
    ]);
    expect(template).toMatchObject({
      id: expect.stringMatching(/^sbxt_/),
      flavorId,
      runtime: 'bwrap',
      network: 'private',
      defaultTtlSeconds: 1800,
      maxTtlSeconds: 14400,
      warm: { min: 2, max: 2 },
      version: 1,
    });
    const table = await compute(['sandbox', 'templates']);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`${template.id}\\s+python\\s+bwrap`));
  });

  it('refuses each bad template before it is stored', async () => {
    const base = ['sandbox-template', 'create', '--pool', poolId, '--flavor', flavorId, '--image', imageId];
    writeFileSync(join(work, 'cloud.yaml'), '#cloud-config\nruncmd: [true]\n');
    const cloud = await refusal([...base, '--name', 'c1', '--user-data', join(work, 'cloud.yaml')]);
    expect(cloud).toMatchObject({ status: 2, code: 'INVALID_ARGUMENT' });
    expect(cloud.stderr).toContain('#!');
    expect(await refusal([...base, '--name', 'c2', '--default-ttl', '5h', '--max-ttl', '4h'])).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await refusal([...base, '--name', 'c3', '--warm-min', '3', '--warm-max', '2'])).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    // Usage errors: refused before anything is sent.
    expect(await refusal([...base, '--name', 'c4', '--warm-max', '2'])).toMatchObject({ status: 2 });
    expect(await refusal([...base, '--name', 'c5', '--volumes', 'notes:relative'])).toMatchObject({
      status: 2,
    });
    expect(await refusal([...base, '--name', 'c6', '--env', 'KEY=plain-value'])).toMatchObject({ status: 2 });
    const otherTenant = await refusal([
      ...base,
      '--name',
      'c7',
      '--env',
      `KEY=secret://globex/sec_${'0'.repeat(26)}`,
    ]);
    expect(otherTenant).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await refusal([...base, '--name', 'python'])).toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(await refusal(['sandbox-template', 'update', 'sbxt_nope', '--warm-min', '1'])).toMatchObject({
      status: 2,
    });
    const templates = await json(['sandbox', 'templates']);
    const python = templates.items.find((t: any) => t.name === 'python');
    expect(await refusal(['sandbox-template', 'update', python.id])).toMatchObject({ status: 2 });
    expect(
      await refusal(['sandbox-template', 'update', python.id, '--user-data', 'x', '--no-user-data']),
    ).toMatchObject({ status: 2 });
    expect(
      await refusal(['sandbox-template', 'update', python.id, '--warm-min', '1', '--if-version', '9']),
    ).toMatchObject({
      code: 'CONFLICT',
    });
    expect(templates.items.map((t: any) => t.name).sort()).toEqual(['python', 'short']);
  });

  it('a template names its tenant’s existing secrets only; a sandbox starts from one that does', async () => {
    const base = ['sandbox-template', 'create', '--pool', poolId, '--flavor', flavorId, '--image', imageId];
    const missing = await refusal([
      ...base,
      '--name',
      'with-env',
      '--env',
      `OPENAI_API_KEY=secret://acme/sec_${'1'.repeat(26)}`,
    ]);
    expect(missing.code).toBe('NOT_FOUND');
    writeFileSync(join(work, 'openai.key'), 'sk-sandboxes-e2e');
    const secret = await json(['secrets', 'put', 'openai', '--value-file', join(work, 'openai.key')]);
    const template = await json([
      ...base,
      '--name',
      'with-env',
      '--env',
      `OPENAI_API_KEY=${secret.reference}`,
    ]);
    expect(template.env).toEqual([{ name: 'OPENAI_API_KEY', secretRef: secret.reference }]);
    const sandbox = await json(['sandbox', 'create', '--template', template.id, '--wait', '10']);
    expect(sandbox.state).toBe('running');
    await json(['sandbox', 'delete', sandbox.id]);
    await until(
      'the sandbox is deleted',
      () => json(['sandbox', 'get', sandbox.id]),
      (s: any) => s.state === 'deleted',
    );
    // Deleted, the secret stops the template's next start, before any node is asked.
    await json(['secrets', 'delete', 'openai']);
    const gone = await refusal(['sandbox', 'create', '--template', template.id]);
    expect(gone.code).toBe('INVALID_STATE');
    expect(gone.stderr).toContain('does not exist');
    await json(['sandbox-template', 'delete', template.id]);
  });
});

describe('warm pools and sandboxes', () => {
  let templateId = '';

  it('fills the warm pool, a create claims a warm sandbox, and the pool refills', async () => {
    const templates = await json(['sandbox', 'templates']);
    templateId = templates.items.find((t: any) => t.name === 'python').id;
    await until(
      'the warm pool fills',
      () => json(['api', 'sandboxTemplates.get', `templateId=${templateId}`]),
      (t: any) => t.warm.ready === 2,
    );
    const claimed = await json(['sandbox', 'create', '--template', templateId, '--ttl', '30m']);
    expect(claimed).toMatchObject({
      id: expect.stringMatching(/^sbx_/),
      state: 'running',
      warm: true,
      hostCertified: true,
      identityRebound: true,
      ownerId: expect.stringMatching(/^usr_/),
    });
    expect(Date.parse(claimed.expiresAt) - Date.now()).toBeGreaterThan(29 * 60_000);
    const refilled = await until(
      'the warm pool refills',
      () => json(['api', 'sandboxTemplates.get', `templateId=${templateId}`]),
      (t: any) => t.warm.ready === 2,
    );
    expect(refilled.warm).toMatchObject({ ready: 2, starting: 0 });
    const events = await json(['events', 'list', '--type', 'sandbox.claimed']);
    expect(events.items.map((e: any) => e.subject.id)).toContain(claimed.id);
    // A template with live sandboxes is not deleted.
    expect(await refusal(['sandbox-template', 'delete', templateId])).toMatchObject({ code: 'CONFLICT' });
    await json(['sandbox', 'delete', claimed.id]);
  });

  it('a cold create reaches running with a host certificate, then extends within the maximum and is deleted', async () => {
    const cold = await json([
      'sandbox-template',
      'create',
      '--name',
      'cold',
      '--pool',
      poolId,
      '--flavor',
      flavorId,
      '--image',
      imageId,
      '--runtime',
      'qemu',
      '--max-ttl',
      '2h',
      '--default-ttl',
      '1h',
    ]);
    const sandbox = await json(['sandbox', 'create', '--template', cold.id, '--wait', '20']);
    expect(sandbox).toMatchObject({ state: 'running', warm: false, runtime: 'qemu', hostCertified: true });
    expect(Date.parse(sandbox.hostCertificateExpiresAt) - Date.now()).toBeGreaterThan(7 * 24 * 3600_000);
    expect(await refusal(['sandbox', 'create', '--template', cold.id, '--ttl', '3h'])).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    const past = await refusal(['sandbox', 'extend', sandbox.id, '--by', '2h']);
    expect(past.code).toBe('INVALID_ARGUMENT');
    const latest = new Date(Date.parse(sandbox.readyAt) + 2 * 3600_000).toISOString();
    expect(past.stderr).toContain(latest);
    expect(await refusal(['sandbox', 'extend', sandbox.id])).toMatchObject({ status: 2 });
    expect(await refusal(['sandbox', 'extend', sandbox.id, '--by', '1m', '--until', latest])).toMatchObject({
      status: 2,
    });
    const extended = await json(['sandbox', 'extend', sandbox.id, '--by', '30m']);
    expect(Date.parse(extended.expiresAt) - Date.parse(sandbox.expiresAt)).toBe(30 * 60_000);
    const toLatest = await json(['sandbox', 'extend', sandbox.id, '--until', latest]);
    expect(toLatest.expiresAt).toBe(latest);
    const list = await compute(['sandbox', 'list']);
    expect(list.stdout).toContain(sandbox.id);
    const deleting = await json(['sandbox', 'delete', sandbox.id]);
    expect(deleting.state).toBe('deleting');
    await until(
      'the sandbox is deleted',
      () => json(['sandbox', 'get', sandbox.id]),
      (s: any) => s.state === 'deleted',
    );
    expect((await compute(['sandbox', 'list'])).stdout).not.toContain(sandbox.id);
    expect((await compute(['sandbox', 'list', '--deleted'])).stdout).toContain(sandbox.id);
  });

  it('a kept snapshot outlives its sandbox; one not kept goes with it', async () => {
    const sandbox = await json(['sandbox', 'create', '--template', templateId]);
    expect(
      await refusal(['api', 'sandboxes.snapshot', `sandboxId=${sandbox.id}`, 'memory:=true']),
    ).toMatchObject({ code: 'UNSUPPORTED' });
    const kept = await json(['sandbox', 'snapshot', sandbox.id, '--keep']);
    const dropped = await json(['sandbox', 'snapshot', sandbox.id]);
    expect(kept).toMatchObject({ state: 'creating', memory: false, keep: true, sandboxId: sandbox.id });
    await until(
      'the snapshots are ready',
      () => json(['sandbox', 'get', sandbox.id]),
      (s: any) => s.snapshots.length === 2 && s.snapshots.every((x: any) => x.state === 'ready'),
    );
    await json(['sandbox', 'delete', sandbox.id]);
    await until(
      'the sandbox is deleted',
      () => json(['sandbox', 'get', sandbox.id]),
      (s: any) => s.state === 'deleted',
    );
    expect(await json(['sandbox-snapshot', 'get', kept.id])).toMatchObject({ state: 'ready', keep: true });
    const listed = await json(['sandbox-snapshot', 'list', '--sandbox', sandbox.id]);
    expect(listed.items.map((s: any) => s.id)).toEqual([kept.id]);
    expect((await json(['sandbox-snapshot', 'get', dropped.id])).state).toBe('deleted');
    await json(['sandbox-snapshot', 'delete', kept.id]);
    await until(
      'the kept snapshot is deleted',
      () => json(['sandbox-snapshot', 'get', kept.id]),
      (s: any) => s.state === 'deleted',
    );
  });

  it('expires a sandbox at the end of its lifetime', async () => {
    const expired = await until(
      'the short sandbox expires',
      () => json(['sandbox', 'get', expiringId]),
      (s: any) => s.state === 'deleted',
      90_000,
    );
    expect(expired.deletedAt).not.toBeNull();
    const events = await json(['events', 'list', '--type', 'sandbox.expired']);
    expect(events.items.map((e: any) => e.subject.id)).toContain(expiringId);
  }, 120_000);
});

describe('sandbox volumes', () => {
  it('grow only, are mounted by a template without a warm pool, and are not deleted while mounted', async () => {
    const volume = await json([
      'sandbox-volume',
      'create',
      '--pool',
      poolId,
      '--name',
      'agent-notes',
      '--size',
      '20',
    ]);
    expect(volume).toMatchObject({
      id: expect.stringMatching(/^vol_/),
      sizeGiB: 20,
      state: 'creating',
      nodeId: expect.stringMatching(/^node_/),
    });
    await until(
      'the volume is ready',
      () => json(['sandbox-volume', 'get', volume.id]),
      (v: any) => v.state === 'ready',
    );
    expect(await refusal(['sandbox-volume', 'resize', volume.id, '--size', '10'])).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await refusal(['sandbox-volume', 'resize', volume.id, '--size', '20'])).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await json(['sandbox-volume', 'resize', volume.id, '--size', '40']);
    await until(
      'the volume grew',
      () => json(['sandbox-volume', 'get', volume.id]),
      (v: any) => v.state === 'ready' && v.sizeGiB === 40,
    );
    const base = ['sandbox-template', 'create', '--pool', poolId, '--flavor', flavorId, '--image', imageId];
    expect(
      await refusal([...base, '--name', 'notes', '--warm-min', '1', '--volumes', 'agent-notes:/workspace']),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(
      await refusal([
        ...base,
        '--name',
        'notes',
        '--volumes',
        'agent-notes:/workspace,agent-notes:/workspace:ro',
      ]),
    ).toMatchObject({ code: 'INVALID_ARGUMENT' });
    const mounting = await json([...base, '--name', 'notes2', '--volumes', `${volume.id}:/workspace:ro`]);
    expect(mounting.volumes).toEqual([
      { volumeId: volume.id, name: 'agent-notes', path: '/workspace', readOnly: true },
    ]);
    const sandbox = await json(['sandbox', 'create', '--template', mounting.id, '--wait', '20']);
    expect(sandbox).toMatchObject({ state: 'running', nodeId: volume.nodeId });
    expect(await refusal(['sandbox-volume', 'delete', volume.id])).toMatchObject({ code: 'CONFLICT' });
    await json(['sandbox', 'delete', sandbox.id]);
    await until(
      'the sandbox is deleted',
      () => json(['sandbox', 'get', sandbox.id]),
      (s: any) => s.state === 'deleted',
    );
    await json(['sandbox-template', 'update', mounting.id, '--volumes', '']);
    await json(['sandbox-volume', 'delete', volume.id]);
    await until(
      'the volume is deleted',
      () => json(['sandbox-volume', 'get', volume.id]),
      (v: any) => v.state === 'deleted',
    );
  });
});

describe('sandbox exec grants', () => {
  it('signs a ten-minute certificate for a session’s key, naming the sandbox; refuses API keys and private keys', async () => {
    const templates = await json(['sandbox', 'templates']);
    const templateId = templates.items.find((t: any) => t.name === 'python').id;
    const sandbox = await json(['sandbox', 'create', '--template', templateId]);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(work, 'id_ed25519')]);
    const publicKey = execFileSync('cat', [join(work, 'id_ed25519.pub')], { encoding: 'utf8' }).trim();
    const byKey = await refusal([
      'api',
      'sandboxes.exec',
      `sandboxId=${sandbox.id}`,
      `publicKey=${publicKey}`,
    ]);
    expect(byKey.code).toBe('ACCESS_DENIED');
    expect(byKey.stderr).toContain('session');
    const session = await sessionToken(dev.acmeAdmin, 'acme');
    const privateKey = await refusal(
      ['api', 'sandboxes.exec', `sandboxId=${sandbox.id}`, `publicKey=@${join(work, 'id_ed25519')}`],
      session,
    );
    expect(privateKey.code).toBe('INVALID_ARGUMENT');
    const grant = await json(
      ['api', 'sandboxes.exec', `sandboxId=${sandbox.id}`, `publicKey=${publicKey}`],
      session,
    );
    expect(grant).toMatchObject({
      sandboxId: sandbox.id,
      account: 'root',
      hostPrincipal: sandbox.id,
      hostCertified: true,
      hostCaPublicKey: expect.stringMatching(/^ssh-ed25519 /),
      ticket: expect.stringMatching(/^bct1\./),
    });
    writeFileSync(join(work, 'id_ed25519-cert.pub'), `${grant.certificate}\n`);
    const shown = execFileSync('ssh-keygen', ['-L', '-f', join(work, 'id_ed25519-cert.pub')], {
      encoding: 'utf8',
    });
    expect(shown).toContain('user certificate');
    expect(shown).toMatch(new RegExp(`Principals: \\n\\s+${sandbox.id}\\n`));
    // From a minute back (a guest clock a little behind) to ten minutes ahead, the default.
    const [, from, to] = /Valid: from (\S+) to (\S+)/.exec(shown)!;
    const lifetime = Date.parse(`${to}Z`) - Date.parse(`${from}Z`);
    expect(lifetime).toBeGreaterThan(10 * 60_000);
    expect(lifetime).toBeLessThanOrEqual(11 * 60_000 + 1000);
    expect(Date.parse(`${to}Z`) - Date.now()).toBeLessThanOrEqual(10 * 60_000 + 1000);
    const caFile = join(work, 'ca.pub');
    writeFileSync(caFile, `${grant.hostCaPublicKey}\n`);
    const caFingerprint = execFileSync('ssh-keygen', ['-l', '-f', caFile], { encoding: 'utf8' }).split(
      ' ',
    )[1];
    expect(shown).toContain(`Signing CA: ED25519 ${caFingerprint}`);
    await json(['sandbox', 'delete', sandbox.id]);
  });

  it('takes the lifetime asked, 1 to 15 minutes: minutes in the API, --minutes in sandbox exec (issue 41)', async () => {
    const templates = await json(['sandbox', 'templates']);
    const templateId = templates.items.find((t: any) => t.name === 'python').id;
    const sandbox = await json(['sandbox', 'create', '--template', templateId]);
    const publicKey = execFileSync('cat', [join(work, 'id_ed25519.pub')], { encoding: 'utf8' }).trim();
    const session = await sessionToken(dev.acmeAdmin, 'acme');
    const grant = (minutes: number) =>
      compute(
        ['api', 'sandboxes.exec', `sandboxId=${sandbox.id}`, `publicKey=${publicKey}`, `minutes:=${minutes}`],
        session,
      );
    for (const minutes of [1, 15]) {
      const answer = await grant(minutes);
      expect(answer.status, answer.stderr).toBe(0);
      const { certificateExpiresAt } = JSON.parse(answer.stdout);
      const ahead = Date.parse(certificateExpiresAt) - Date.now();
      expect(ahead).toBeLessThanOrEqual(minutes * 60_000);
      expect(ahead).toBeGreaterThan(minutes * 60_000 - 60_000);
    }
    for (const minutes of [0, 16]) {
      const refused = await grant(minutes);
      expect(refused.status, `minutes ${minutes}`).not.toBe(0);
      expect(refused.stderr).toMatch(/^INVALID_ARGUMENT: /);
      expect(refused.stderr).toContain('minutes');
    }
    for (const minutes of ['16', '0']) {
      const refused = await refusal(
        [
          'sandbox',
          'exec',
          sandbox.id,
          '--key',
          join(work, 'id_ed25519'),
          '--minutes',
          minutes,
          '--',
          'true',
        ],
        session,
      );
      expect(refused).toMatchObject({ status: 2, code: 'INVALID_ARGUMENT' });
      expect(refused.stderr).toContain(`--minutes must be at ${minutes === '16' ? 'most 15' : 'least 1'}`);
    }
    const help = await compute(['help', 'sandbox', 'exec']);
    expect(help.stdout).toMatch(/--minutes N\s+How long the certificate is valid, in minutes/);
    expect(help.stdout).toContain('(default: 10)');
    await json(['sandbox', 'delete', sandbox.id]);
  });
});

describe('tenancy and junk', () => {
  it('another tenant gets NOT_FOUND on every id', async () => {
    const templates = await json(['sandbox', 'templates']);
    const template = templates.items.find((t: any) => t.name === 'python');
    const sandbox = await json(['sandbox', 'create', '--template', template.id]);
    const snapshot = await json(['sandbox', 'snapshot', sandbox.id]);
    const volume = await json([
      'sandbox-volume',
      'create',
      '--pool',
      poolId,
      '--name',
      'scratch',
      '--size',
      '1',
    ]);
    const root = dev.rootAdmin.apiKey;
    for (const args of [
      ['sandbox', 'get', sandbox.id],
      ['sandbox', 'delete', sandbox.id],
      ['sandbox', 'extend', sandbox.id, '--by', '1m'],
      ['sandbox', 'snapshot', sandbox.id],
      ['sandbox', 'create', '--template', template.id],
      ['sandbox-template', 'update', template.id, '--warm-min', '0'],
      ['sandbox-template', 'delete', template.id],
      ['sandbox-snapshot', 'get', snapshot.id],
      ['sandbox-snapshot', 'delete', snapshot.id],
      ['sandbox-volume', 'get', volume.id],
      ['sandbox-volume', 'resize', volume.id, '--size', '2'],
      ['sandbox-volume', 'delete', volume.id],
      ['api', 'sandboxTemplates.get', `templateId=${template.id}`],
    ])
      expect(await refusal(args, root), args.join(' ')).toMatchObject({ code: 'NOT_FOUND' });
    const rootList = await json(['sandbox', 'list', '--all'], root);
    expect(rootList.items).toEqual([]);
    await json(['sandbox', 'delete', sandbox.id]);
  });

  it('junk, NUL bytes and huge inputs are refused without a 5xx', async () => {
    const token = dev.acmeAdmin.apiKey;
    const bodies: [string, unknown][] = [
      ['sandboxTemplates/create', { name: 'a\u0000b', poolId, flavorId, imageId }],
      [
        'sandboxTemplates/create',
        { name: 'big', poolId, flavorId, imageId, userData: `#!/bin/sh\n${'x'.repeat(40_000)}` },
      ],
      [
        'sandboxTemplates/create',
        { name: 'vols', poolId, flavorId, imageId, volumes: [{ name: 'x', path: '/a/../b' }] },
      ],
      ['sandboxTemplates/create', { name: 'n'.repeat(5000), poolId, flavorId, imageId }],
      ['sandboxes/create', { templateId: 'sbxt_\u0000', waitSeconds: 31 }],
      ['sandboxes/create', { templateId: `sbxt_${'0'.repeat(26)}` }],
      [
        'sandboxes/extend',
        { sandboxId: `sbx_${'0'.repeat(26)}`, bySeconds: 60, until: '2030-01-01T00:00:00Z' },
      ],
      ['sandboxes/exec', { sandboxId: `sbx_${'0'.repeat(26)}`, publicKey: 'ssh-ed25519 \u0000' }],
      ['sandboxVolumes/create', { poolId, name: 'huge', sizeGiB: 16385 }],
      ['sandboxVolumes/create', { poolId, name: 'neg', sizeGiB: -1 }],
      ['sandboxSnapshots/get', { snapshotId: ['snap_x'] }],
      ['sandboxTemplates/list', { limit: 1e9 }],
    ];
    for (const [path, body] of bodies) {
      const response = await fetch(`${url}/api/compute/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
      expect(response.status, `${path} ${JSON.stringify(body).slice(0, 80)}`).toBeGreaterThanOrEqual(400);
      expect(response.status, `${path} ${JSON.stringify(body).slice(0, 80)}`).toBeLessThan(500);
    }
    const notJson = await fetch(`${url}/api/compute/sandboxes/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: '{"templateId":',
    });
    expect(notJson.status).toBe(400);
  });
});
