/**
 * Commands without --url: the configuration's handler in process (same envelope, CSRF rules, body
 * limit and IAM decisions as over HTTP), config commands, project commands and init.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ComputeInstance } from '../src/types.js';
import { createCli, main } from '../src/cli/index.js';
import { captureIO } from './cli-support.js';
import { createTestDeployment, type TestDeployment } from './support.js';

let deployment: TestDeployment;
// The suite's deployment, handed to each command without letting the command close it.
const borrowed = (): ComputeInstance => {
  const c = deployment.compute;
  return {
    handler: (request: Request) => c.handler(request),
    config: c.config,
    database: c.database,
    iam: c.iam,
    routes: () => c.routes(),
    migrate: () => c.migrate(),
    migrationStatus: () => c.migrationStatus(),
    doctor: () => c.doctor(),
    startWorkers: (roles) => c.startWorkers(roles),
    close: async () => undefined,
  } as ComputeInstance;
};
const cli = createCli({ projectCommands: false, loadCompute: async () => borrowed() });
const scratch = mkdtempSync(join(import.meta.dirname, '.tmp-cli-'));

beforeAll(async () => {
  deployment = await createTestDeployment('pglite');
});
afterAll(async () => {
  await deployment.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('token commands in process', () => {
  const env = (token?: string): Record<string, string> => ({
    HOME: scratch,
    BETTER_IAM_HOME: join(scratch, 'iam'),
    ...(token ? { BETTER_COMPUTE_TOKEN: token } : {}),
  });

  it('api system.whoami answers as the token’s identity', async () => {
    const { io, out } = captureIO(env('t-acme-alice'));
    await cli.run(['api', 'system.whoami', '--query', 'principalId'], io);
    expect(out).toEqual(['usr_alice']);
  });

  it('a public method needs no credential; the others stop with MISSING_ENV', async () => {
    const { io, out } = captureIO(env());
    await cli.run(['api', 'system.version', '--query', 'product'], io);
    expect(out).toEqual(['better-compute']);
    const failed = captureIO(env());
    expect(await main(['api', 'events.list'], cli, failed.io)).toBe(1);
    expect(failed.err[0]).toMatch(/^MISSING_ENV: events.list needs a credential/);
  });

  it('fills tenantId from --tenant; a foreign tenant is refused by the handler', async () => {
    const { io, out } = captureIO(env('t-acme-alice'));
    await cli.run(['api', 'events.list', '--tenant', 'acme', '--format', 'table'], io);
    expect(out[0]).toBe('(no rows)');
    const foreign = captureIO(env('t-acme-alice'));
    expect(await main(['api', 'events.list', '--tenant', 'globex'], cli, foreign.io)).toBe(1);
    expect(foreign.err[0]).toMatch(/^ACCESS_DENIED: /);
  });

  it('an unknown method is the handler’s NOT_FOUND', async () => {
    const { io, err } = captureIO(env('t-acme-alice'));
    expect(await main(['api', 'nosuch.method'], cli, io)).toBe(1);
    expect(err[0]).toMatch(/^NOT_FOUND: /);
  });

  it('the body limit applies in process too', async () => {
    const { io, err } = captureIO(env('t-acme-alice'));
    expect(await main(['api', 'system.whoami', `padding=${'x'.repeat(70 * 1024)}`], cli, io)).toBe(1);
    expect(err[0]).toMatch(/^PAYLOAD_TOO_LARGE: /);
  });

  it('auth login checks the token in process and saves it without a URL', async () => {
    const { io, out } = captureIO(env(), { stdin: async () => 't-acme-bob\n' });
    await cli.run(['auth', 'login', '--profile', 'local', '--format', 'compact'], io);
    expect(JSON.parse(out[0]!)).toMatchObject({
      profile: 'local',
      url: null,
      tenantId: 'acme',
      principalId: 'usr_bob',
      verified: true,
    });
    const later = captureIO(env());
    await cli.run(['api', 'system.whoami', '--query', 'principalId'], later.io);
    expect(later.out).toEqual(['usr_bob']);
  });
});

describe('config commands', () => {
  it('migrate prints what it applied', async () => {
    const { io, out } = captureIO({});
    await cli.run(['migrate', '--format', 'compact'], io);
    expect(JSON.parse(out[0]!)).toMatchObject({ applied: [] });
  });

  it('doctor prints its report as JSON, its findings as a table on request; --query picks the checks', async () => {
    const { io, out } = captureIO({});
    await cli.run(['doctor'], io);
    expect(JSON.parse(out[0]!)).toMatchObject({
      findings: expect.arrayContaining([expect.objectContaining({ check: 'database.reachable' })]),
    });
    const table = captureIO({});
    await cli.run(['doctor', '--format', 'table'], table.io);
    expect(table.out[0]!.split('\n')[0]).toMatch(/^check\s+severity\s+message$/);
    const checks = captureIO({});
    await cli.run(['doctor', '--query', 'findings[].check'], checks.io);
    expect(checks.out[0]).toContain('database.reachable');
  });

  it('doctor --strict fails with DOCTOR_FINDINGS on any warning or error', async () => {
    const report = await deployment.compute.doctor();
    const { io, err } = captureIO({});
    const status = await main(['doctor', '--strict'], cli, io);
    if (report.findings.some((f) => f.severity !== 'ok')) {
      expect(status).toBe(1);
      expect(err[0]).toMatch(/^DOCTOR_FINDINGS: \d+ finding\(s\): /);
    } else {
      expect(status).toBe(0);
    }
    const failing = createCli({
      projectCommands: false,
      loadCompute: async () =>
        ({
          ...borrowed(),
          doctor: async () => ({
            ok: false,
            findings: [{ check: 'clock.skew', severity: 'warning', message: 'off by 3s' }],
          }),
        }) as ComputeInstance,
    });
    const strict = captureIO({});
    expect(await main(['doctor', '--strict', '--format', 'table'], failing, strict.io)).toBe(1);
    expect(strict.out).toEqual(['check       severity  message\nclock.skew  warning   off by 3s']);
    expect(strict.err[0]).toBe('DOCTOR_FINDINGS: 1 finding(s): clock.skew (warning)');
  });

  it('serve runs until the CliIO’s signal aborts', async () => {
    const controller = new AbortController();
    const { io, err } = captureIO({}, { signal: controller.signal });
    const logged = new Promise<void>((resolve) => {
      io.err = (line) => {
        err.push(line);
        if (line.includes('serving')) resolve();
      };
    });
    const running = cli.run(['serve', '--port', '0', '--roles', 'api'], io);
    await logged;
    controller.abort();
    await expect(running).resolves.toBeUndefined();
    expect(err[0]).toMatch(/^better-compute serving http:\/\/127\.0\.0\.1:\d+\/api\/compute \(roles: api\)$/);
  });
});

describe('a configuration’s project commands, and init', () => {
  it('lists, helps and runs the configuration’s commands', async () => {
    const dir = mkdtempSync(join(scratch, 'project-'));
    writeFileSync(
      join(dir, 'better-compute.config.mjs'),
      `export default { database: 'pglite:memory' };
export const commands = [
  { name: 'seed', summary: 'Create the demo sites and pools', target: 'none',
    flags: { region: { type: 'string', description: 'Region label', default: 'eu' } },
    run: ({ flags }) => ({ created: true, region: flags.region }) },
  { name: 'whoami-twice', summary: 'Call system.version through context.api()', target: 'token',
    run: async ({ api }) => (await (await api()).call('system.version', {})).product },
];
`,
    );
    const project = createCli({ loadCompute: async () => borrowed() });
    const help = captureIO({}, { cwd: dir });
    await project.run(['help'], help.io);
    expect(help.out[0]).toContain(
      'Project: Commands of this configuration\n  seed          Create the demo sites and pools',
    );
    const manifest = captureIO({}, { cwd: dir });
    await project.run(['help', '--json'], manifest.io);
    expect(
      JSON.parse(manifest.out[0]!).commands.find((c: { name: string }) => c.name === 'seed'),
    ).toMatchObject({ project: true, group: 'Project' });
    const seed = captureIO({}, { cwd: dir });
    await project.run(['seed', '--region', 'us', '--format', 'compact'], seed.io);
    expect(seed.out).toEqual(['{"created":true,"region":"us"}']);
    // A home of its own: with no HOME, Better IAM's saved session is looked for in the real one.
    const token = captureIO({ HOME: scratch, BETTER_IAM_HOME: join(scratch, 'iam') }, { cwd: dir });
    await project.run(['whoami-twice'], token.io);
    expect(token.out).toEqual(['better-compute']);
    const typo = captureIO({}, { cwd: dir });
    expect(await main(['sede'], project, typo.io)).toBe(2);
    expect(typo.err[0]).toBe('INVALID_COMMAND: unknown command "sede"; did you mean "seed"?');
  });

  it('init writes a starter configuration once, then ALREADY_EXISTS', async () => {
    const dir = mkdtempSync(join(scratch, 'init-'));
    const { io, out } = captureIO({}, { cwd: dir });
    await cli.run(['init'], io);
    const path = join(dir, 'better-compute.config.ts');
    expect(out[0]).toBe(
      `Wrote ${path}.\nNext: better-compute migrate, then better-compute serve (or better-compute dev).`,
    );
    expect(readFileSync(path, 'utf8')).toContain("import { defineConfig } from 'better-compute';");
    const again = captureIO({}, { cwd: dir });
    expect(await main(['init'], cli, again.io)).toBe(1);
    expect(again.err[0]).toBe(
      `ALREADY_EXISTS: ${path} already exists; init never writes over a configuration`,
    );
    expect(existsSync(path)).toBe(true);
  });
});
