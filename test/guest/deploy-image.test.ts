/**
 * The server image for real (deploy/, docs/deploy.md). No container registry is reachable here, so
 * scripts/build-node-base.sh first makes a stand-in for node:20-bookworm-slim (a debootstrap minbase
 * with this machine's Node 20, cached outside the repository); deploy/build-image.sh then builds
 * deploy/Containerfile from source on it with podman (runc, vfs: what this host runs). The image
 * runs `migrate`, then `serve`, with a read-only root file system on the host's network against a
 * fresh PostgreSQL database, the PKI bundle, the deployment secret, the database URL and the first
 * administrator's password as mounted files. Checked: the probes and the image's own HEALTHCHECK,
 * a public and an authenticated API call, doctor inside the container, the uid, the read-only root,
 * no secret in argv, environment or logs, and a clean stop. Also: the systemd unit verifies and
 * the shell scripts pass shellcheck.
 *
 * Needs root, podman, runc, debootstrap (host group `image`, installed by the guest project's set-up).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '@better-compute/db/testing';
import { missingTools } from '../../scripts/host-tools.mjs';
import { computeBin, freePort, root, runBin } from '../e2e/support.js';

const IMAGE_UID = 10001;
const cacheRoot =
  process.env.BETTER_COMPUTE_IMAGE_TEST_CACHE ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'better-compute', 'image-test');
const work = mkdtempSync(join(tmpdir(), 'bc-image-'));

// podman as this host runs it: the runc runtime (crun fails on hybrid cgroups), no default ulimits,
// and a vfs store of the test's own, which keeps the base image between runs.
writeFileSync(
  join(work, 'containers.conf'),
  '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n',
);
writeFileSync(
  join(work, 'storage.conf'),
  `[storage]\ndriver = "vfs"\nrunroot = "/run/better-compute-image-test"\ngraphroot = "${join(cacheRoot, 'storage')}"\n`,
);
const podmanEnv = {
  ...process.env,
  CONTAINERS_CONF: join(work, 'containers.conf'),
  CONTAINERS_STORAGE_CONF: join(work, 'storage.conf'),
};

function sh(command: string, args: string[], timeoutMs = 120_000) {
  const result = spawnSync(command, args, { env: podmanEnv, encoding: 'utf8', timeout: timeoutMs });
  return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
}
const podman = (args: string[], timeoutMs?: number) => sh('podman', args, timeoutMs);
/** podman's own complaints that it has no systemd to schedule health checks with, left out. */
const quiet = (text: string) =>
  text
    .split('\n')
    .filter((line) => !line.includes('unable to get systemd connection'))
    .join('\n')
    .trim();

/**
 * A JSON POST on a connection of its own: fetch may reuse a kept-alive socket the server is closing
 * at that moment, which a slow machine makes likely.
 */
function postFresh(target: string, body: unknown): Promise<{ status: number; body: string }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      target,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const missing = process.getuid?.() === 0 ? missingTools(['image']) : ['root'];
const postgres = await isPostgresReachable();

describe.runIf(postgres)('the server image', () => {
  const id = `${process.pid}-${Date.now().toString(36)}`;
  const tag = `localhost/better-compute-test-${id}:test`;
  const container = `bc-image-${id}`;
  const secrets = join(work, 'secrets');
  const secret = randomBytes(24).toString('hex');
  const adminPassword = `image-admin-${randomBytes(12).toString('hex')}`;
  let database: TestDatabase;
  let port: number;
  let url: string;
  let imageId = '';
  let pid = 0;
  const measured: Record<string, string> = {};

  /** `podman run` of the image with the mounted files and the environment naming them. */
  const runArgs = (extra: string[]) => [
    'run',
    '--network',
    'host',
    '--read-only',
    '--volume',
    `${secrets}:/run/secrets/better-compute:ro`,
    '--env',
    'BETTER_COMPUTE_DATABASE_URL_FILE=/run/secrets/better-compute/database-url',
    '--env',
    'BETTER_COMPUTE_SECRET_FILE=/run/secrets/better-compute/secret',
    '--env',
    'BETTER_COMPUTE_PKI=/run/secrets/better-compute/pki.json',
    ...extra,
  ];

  beforeAll(async () => {
    if (missing.length > 0)
      throw new Error(
        `the image test needs ${missing.join(', ')}: run it as root after node scripts/host-tools.mjs image`,
      );

    // The stand-in base, built once per recipe and Node version, imported into the test's store.
    const baseScript = join(root, 'scripts', 'build-node-base.sh');
    const tarball = sh(baseScript, ['--print-path']).stdout.trim();
    const base = `localhost/better-compute-node-base:${basename(dirname(tarball))}`;
    let started = Date.now();
    const made = sh(baseScript, ['--import', base], 30 * 60_000);
    if (made.status !== 0) throw new Error(`the base image did not build:\n${made.stderr}`);
    measured.base = `${((Date.now() - started) / 1000).toFixed(0)} s`;

    // The image, from source, as a user builds it (plus this host's --network and the stand-in base).
    started = Date.now();
    const built = sh(
      join(root, 'deploy', 'build-image.sh'),
      ['--tag', tag, '--build-arg', `BASE=${base}`, '--network', 'host', '--layers=false'],
      30 * 60_000,
    );
    if (built.status !== 0) throw new Error(`the image did not build:\n${built.stderr.slice(-4000)}`);
    measured.build = `${((Date.now() - started) / 1000).toFixed(0)} s`;
    expect(built.stdout.trim()).toBe(tag);
    imageId = podman(['image', 'inspect', '--format', '{{.Id}}', tag]).stdout.trim();
    const size = (image: string) =>
      Number(podman(['image', 'inspect', '--format', '{{.Size}}', image]).stdout.trim());
    measured.image = `${(size(tag) / 1e6).toFixed(0)} MB`;
    measured.added = `${((size(tag) - size(base)) / 1e6).toFixed(0)} MB over the base`;

    // A fresh database, and the deployment's files as an operator mounts them: owned by the image's
    // user, readable by it alone. The bundle is made by the checkout's binary with the same secret.
    database = await createTestDatabase('postgres', 1);
    const files = { secret: `${secret}\n`, 'admin-password': adminPassword, 'database-url': database.url! };
    mkdirSync(secrets);
    for (const [name, contents] of Object.entries(files))
      writeFileSync(join(secrets, name), contents, { mode: 0o600 });
    const pki = runBin(computeBin, ['pki', 'init', '--trust-domain', 'image.test', '--format', 'compact'], {
      cwd: work,
      env: {
        HOME: work,
        BETTER_COMPUTE_SECRET_FILE: join(secrets, 'secret'),
        BETTER_COMPUTE_PKI: join(secrets, 'pki.json'),
      },
    });
    if (pki.status !== 0) throw new Error(`pki init failed: ${pki.stderr}`);
    for (const name of [...Object.keys(files), 'pki.json']) {
      chownSync(join(secrets, name), IMAGE_UID, IMAGE_UID);
      chmodSync(join(secrets, name), 0o400);
    }
    chownSync(secrets, IMAGE_UID, IMAGE_UID);
    chmodSync(secrets, 0o500);

    started = Date.now();
    const migrate = podman([...runArgs(['--rm', '--no-healthcheck']), tag, 'migrate', '--format', 'compact']);
    if (migrate.status !== 0) throw new Error(`migrate in the image failed:\n${quiet(migrate.stderr)}`);
    measured.migrate = `${((Date.now() - started) / 1000).toFixed(1)} s`;
    expect(JSON.parse(migrate.stdout).applied).toEqual(
      expect.arrayContaining([
        { module: 'compute', name: '0001_foundation' },
        { module: 'iam', name: '0001_init' },
      ]),
    );

    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    started = Date.now();
    const run = podman([
      ...runArgs([
        '--detach',
        '--name',
        container,
        '--env',
        'BETTER_COMPUTE_ADMIN_EMAIL=ops@root.example',
        '--env',
        'BETTER_COMPUTE_ADMIN_PASSWORD_FILE=/run/secrets/better-compute/admin-password',
        '--env',
        `BETTER_COMPUTE_HEALTHCHECK_URL=${url}/readyz`,
      ]),
      tag,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ]);
    if (run.status !== 0) throw new Error(`podman run failed:\n${quiet(run.stderr)}`);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const answer = await fetch(`${url}/healthz`).catch(() => undefined);
      if (answer?.status === 200) break;
      const state = podman(['inspect', '--format', '{{.State.Status}}', container]).stdout.trim();
      if (state !== 'running' || Date.now() > deadline)
        throw new Error(
          `serve in the image is ${state}, not answering:\n${quiet(podman(['logs', container]).stderr)}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    measured.start = `${((Date.now() - started) / 1000).toFixed(1)} s to /healthz`;
    pid = Number(podman(['inspect', '--format', '{{.State.Pid}}', container]).stdout.trim());
    console.log(`deploy image: ${JSON.stringify(measured)}`);
  }, 60 * 60_000);

  afterAll(async () => {
    podman(['rm', '--force', '--time', '5', container]);
    if (imageId) podman(['rmi', '--force', imageId]);
    await database?.close();
    rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it('answers /healthz and /readyz with 200 against the host PostgreSQL', async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      ok: true,
      checks: { database: 'ok', schema: 'ok', roles: 'ok' },
    });
  });

  it("passes the image's own HEALTHCHECK", () => {
    const config = JSON.parse(
      podman(['image', 'inspect', '--format', '{{json .Config.Healthcheck}}', tag]).stdout,
    );
    expect(config.Test.join(' ')).toContain('BETTER_COMPUTE_HEALTHCHECK_URL');
    const check = podman(['healthcheck', 'run', container]);
    expect(quiet(check.stderr)).toBe('');
    expect(check.status).toBe(0);
  });

  it('answers system.version without a credential, and system.whoami for the administrator from the mounted password', async () => {
    const env = { HOME: work, BETTER_IAM_HOME: join(work, 'iam') };
    const version = runBin(computeBin, ['api', 'system.version', '--url', url, '--query', 'product'], {
      cwd: work,
      env,
    });
    expect(version.stdout).toBe('better-compute\n');
    const signIn = await postFresh(`${url}/api/iam/sessions/signIn`, {
      email: 'ops@root.example',
      password: adminPassword,
      tenantId: 'root',
    });
    expect(signIn.status).toBe(200);
    const token = (JSON.parse(signIn.body) as { data: { token: string } }).data.token;
    const whoami = runBin(computeBin, ['api', 'system.whoami', '--url', url, '--format', 'compact'], {
      cwd: work,
      env: { ...env, BETTER_COMPUTE_TOKEN: token },
    });
    expect(whoami.stderr).toBe('');
    expect(JSON.parse(whoami.stdout)).toMatchObject({
      tenantId: 'root',
      platformOperator: true,
      credentialKind: 'session',
    });
    // serve's access line for it (JSON: standard output is not a terminal), and no token in the log.
    // Lines are written in batches at most 100 ms apart (host/access-log.ts): read until it is there.
    const accessLineOf = (stdout: string) =>
      stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.log === 'access' && line.method === 'system.whoami');
    let logs = podman(['logs', container]);
    for (let tries = 0; tries < 50 && !accessLineOf(logs.stdout); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      logs = podman(['logs', container]);
    }
    expect(accessLineOf(logs.stdout)).toMatchObject({ principalKind: 'person', status: 200 });
    expect(logs.stdout + logs.stderr).not.toContain(token);
  });

  it('finds the mounted bundle and secret: doctor inside the running container', () => {
    const doctor = podman([
      'exec',
      container,
      'better-compute',
      'doctor',
      '--query',
      'findings',
      '--format',
      'compact',
    ]);
    const findings = JSON.parse(doctor.stdout) as { check: string; severity: string }[];
    const severity = (check: string) => findings.find((finding) => finding.check === check)?.severity;
    for (const check of [
      'database.reachable',
      'schema.current',
      'secrets.sealed',
      'pki.present',
      'pki.unsealable',
    ])
      expect(`${check} ${severity(check)}`).toBe(`${check} ok`);
  });

  it('runs as its own unprivileged user', () => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(status).toMatch(
      new RegExp(`^Uid:\\t${IMAGE_UID}\\t${IMAGE_UID}\\t${IMAGE_UID}\\t${IMAGE_UID}$`, 'm'),
    );
    expect(status).toMatch(
      new RegExp(`^Gid:\\t${IMAGE_UID}\\t${IMAGE_UID}\\t${IMAGE_UID}\\t${IMAGE_UID}$`, 'm'),
    );
    expect(status).toMatch(/^CapEff:\t0000000000000000$/m);
    expect(podman(['exec', container, 'id', '-un']).stdout.trim()).toBe('better-compute');
  });

  it('cannot write its root file system', () => {
    for (const path of ['/opt/better-compute/x', '/var/lib/better-compute/x', '/usr/local/bin/x', '/etc/x']) {
      const write = podman(['exec', container, 'sh', '-c', `echo x > ${path}`]);
      expect(write.status, path).not.toBe(0);
      expect(write.stderr, path).toContain('Read-only file system');
    }
  });

  it('holds no secret in its argv, environment or output', () => {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(cmdline).toEqual([
      'node',
      '/usr/local/bin/better-compute',
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ]);
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    expect(environ).toContain('BETTER_COMPUTE_SECRET_FILE=/run/secrets/better-compute/secret');
    const logs = podman(['logs', container]);
    for (const value of [secret, adminPassword, database.url!]) {
      expect(environ).not.toContain(value);
      expect(cmdline.join(' ')).not.toContain(value);
      expect(logs.stdout + logs.stderr).not.toContain(value);
    }
  });

  it('stops cleanly on SIGTERM, with exit status 0', () => {
    const stop = podman(['stop', '--time', '30', container], 60_000);
    expect(stop.status, stop.stderr).toBe(0);
    expect(podman(['inspect', '--format', '{{.State.ExitCode}}', container]).stdout.trim()).toBe('0');
    expect(podman(['logs', container]).stderr).toContain(
      'better-compute stopping: finishing requests and jobs in flight',
    );
  }, 120_000);
});

describe.runIf(missing.length === 0)('the systemd unit and the scripts', () => {
  it('the unit verifies, with its hardening scored OK by systemd-analyze security', () => {
    // verify checks that ExecStart's program exists: the copy points at the checkout's binary.
    const dir = mkdtempSync(join(tmpdir(), 'bc-unit-'));
    const unit = join(dir, 'better-compute.service');
    writeFileSync(
      unit,
      readFileSync(join(root, 'deploy', 'better-compute.service'), 'utf8').replaceAll(
        '/usr/local/bin/better-compute',
        computeBin,
      ),
    );
    const verify = sh('systemd-analyze', ['verify', unit]);
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
    // Exposure 0 (locked down) to 10; 2.0 and under is what systemd calls OK.
    const security = sh('systemd-analyze', ['security', '--offline=yes', '--threshold=20', unit]);
    rmSync(dir, { recursive: true, force: true });
    expect(security.stdout).toMatch(/Overall exposure level for better-compute\.service: [01]\.\d OK/);
    expect(security.status).toBe(0);
  });

  it('the build scripts pass shellcheck', () => {
    const check = sh('shellcheck', [
      join(root, 'deploy', 'build-image.sh'),
      join(root, 'scripts', 'build-node-base.sh'),
    ]);
    expect(check.stdout).toBe('');
    expect(check.status).toBe(0);
  });
});
