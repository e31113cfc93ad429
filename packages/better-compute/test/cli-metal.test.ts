/**
 * The site-tokens commands in process, against a deployment with the real embedded Better IAM on
 * PGlite: --out writes the one-time token to a new 0600 file and never over one (ALREADY_EXISTS,
 * nothing minted), revoke refuses a pasted token before anything is sent, and a machine joining
 * with the token becomes its site's agent. The metal commands: enroll reads the BMC password from
 * --bmc-password-file only (a missing, empty or multi-line file is refused before anything is
 * sent, and no answer holds the password), list prints a table, bad arguments are refused before
 * sending. metal discovered prints the site's PXE discovery as a table (candidates first) and
 * confirm-mac binds a candidate's MAC, the server's refusals printed with their codes.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { createCli, main } from '../src/cli/index.js';
import { recordPxeDiscovery } from '../src/modules/metal/index.js';
import { captureIO } from './cli-support.js';

let database: TestDatabase;
let compute: ComputeInstance;
let rootKey: string;
/** Every method the commands sent, in order. */
const sent: string[] = [];
const scratch = mkdtempSync(join(import.meta.dirname, '.tmp-cli-metal-'));

const borrowed = (): ComputeInstance =>
  ({
    ...compute,
    handler: (request: Request) => {
      sent.push(new URL(request.url).pathname.replace(/^\/api\/compute\//, '').replaceAll('/', '.'));
      return compute.handler(request);
    },
    close: async () => undefined,
  }) as ComputeInstance;
const cli = createCli({ projectCommands: false, loadCompute: async () => borrowed() });

const env = (): Record<string, string> => ({
  HOME: scratch,
  BETTER_IAM_HOME: join(scratch, 'iam'),
  BETTER_COMPUTE_TOKEN: rootKey,
  BETTER_COMPUTE_TENANT: 'root',
});
async function run(argv: string[]): Promise<string[]> {
  const { io, out } = captureIO(env(), { cwd: scratch });
  await cli.run(argv, io);
  return out;
}
async function json<T = any>(argv: string[]): Promise<T> {
  return JSON.parse((await run([...argv, '--format', 'compact']))[0]!) as T;
}
async function status(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const { io, out, err } = captureIO(env(), { cwd: scratch });
  const code = await main(argv, cli, io);
  return { code, out, err };
}
async function publicCall<T = any>(method: string, body: unknown): Promise<T> {
  const response = await compute.handler(
    new Request(`http://localhost/api/compute/${method.replaceAll('.', '/')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
  const answer = (await response.json()) as { data?: T; error?: { code: string; message: string } };
  if (answer.error) throw new Error(`${method}: ${answer.error.code}: ${answer.error.message}`);
  return answer.data as T;
}

let poolId: string;
let siteId: string;

beforeAll(async () => {
  database = await createTestDatabase('pglite');
  compute = await betterCompute(
    { database, trustedOrigins: [], rateLimit: false, secret: 'cli-metal-suite-secret-0123456789' },
    { log: () => {} },
  );
  await compute.migrate();
  const dev = await compute.embeddedIam!.bootstrapDev();
  rootKey = dev!.rootAdmin.apiKey;
  siteId = (await json(['sites', 'create', 'dc-metal', '--key', 'cli-metal-site-1'])).id;
  const api = await (
    await import('../src/cli/transport.js')
  ).createCliApi({
    io: { ...captureIO(env()).io, err: () => {}, cwd: scratch },
    global: {
      format: undefined,
      query: undefined,
      url: undefined,
      tenant: 'root',
      config: undefined,
      profile: undefined,
    },
    compute: async () => borrowed(),
  });
  poolId = (await api.call('pools.create', { siteId, name: 'agents', class: 'gpu' })).id;
});
afterAll(async () => {
  await compute?.close();
  await database?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('site-tokens', () => {
  let token: string;
  let tokenId: string;

  it('create --out writes the token to a new 0600 file and prints the rest', async () => {
    const answer = await json([
      'site-tokens',
      'create',
      '--pool',
      poolId,
      '--pre-approved',
      '--out',
      'site.token',
    ]);
    const path = join(scratch, 'site.token');
    expect(Object.keys(answer)).toEqual(['siteToken', 'out']);
    expect(answer.out).toBe(path);
    expect(answer.siteToken).toMatchObject({ poolId, siteId, state: 'active', preApproved: true });
    tokenId = answer.siteToken.id;
    expect(statSync(path).mode & 0o777).toBe(0o600);
    token = readFileSync(path, 'utf8');
    expect(token).toMatch(new RegExp(`^${tokenId}\\.[A-Za-z0-9_-]+\\n$`));
    token = token.trim();
  });

  it('never over an existing file: ALREADY_EXISTS, nothing sent, the file unchanged', async () => {
    writeFileSync(join(scratch, 'taken.token'), 'mine\n');
    sent.length = 0;
    const failed = await status(['site-tokens', 'create', '--pool', poolId, '--out', 'taken.token']);
    expect(failed.code).toBe(1);
    expect(failed.err.filter((line) => !line.startsWith('idempotency key: '))[0]).toBe(
      'ALREADY_EXISTS: taken.token already exists; a token is never written over a file',
    );
    expect(sent).toEqual([]);
    expect(readFileSync(join(scratch, 'taken.token'), 'utf8')).toBe('mine\n');
  });

  it('revoke refuses a pasted token and a wrong id before sending', async () => {
    sent.length = 0;
    const pasted = await status(['site-tokens', 'revoke', token]);
    expect(pasted.code).toBe(2);
    expect(pasted.err[0]).toBe(
      'INVALID_ARGUMENT: siteToken must be a site token id (stok_…), not a token: it contains a "."; nothing was sent',
    );
    expect(pasted.err.join('\n')).not.toContain(token.split('.')[1]);
    const wrongKind = await status(['site-tokens', 'revoke', 'jtok_01k5w00000000000000000000']);
    expect(wrongKind.code).toBe(2);
    expect(wrongKind.err[0]).toMatch(/^INVALID_ARGUMENT: siteToken must be a site token id like stok_01…/);
    expect(sent).toEqual([]);
  });

  it('the machine joining with it is the site’s agent; revoke by id', async () => {
    const joined = await publicCall('nodes.join', {
      joinToken: token,
      hostname: 'agent-1',
      inventory: { cpuCores: 2, memoryGiB: 4, gpus: [] },
    });
    const node = await json(['nodes', 'get', joined.nodeId]);
    expect(node.role).toBe('site-agent');
    const revoked = await json(['site-tokens', 'revoke', tokenId]);
    expect(revoked).toMatchObject({ id: tokenId, state: 'revoked' });
  });
});

describe('metal', () => {
  const PASSWORD = 'cli-bmc-pw-91ac';
  const enroll = (file: string, more: string[] = []) => [
    'metal',
    'enroll',
    'r1-u1',
    '--site',
    siteId,
    '--bmc-driver',
    'ipmi',
    '--bmc-address',
    '10.0.0.7',
    '--bmc-user',
    'admin',
    '--bmc-password-file',
    file,
    '--product-uuid',
    '4c4c4544-0042-3510-8052-b4c04f4a4e31',
    ...more,
  ];

  it('enroll refuses a missing, empty or multi-line password file before sending', async () => {
    writeFileSync(join(scratch, 'empty.pass'), '\n');
    writeFileSync(join(scratch, 'two.pass'), 'one\ntwo\n');
    sent.length = 0;
    for (const [file, message] of [
      ['missing.pass', 'INVALID_ARGUMENT: --bmc-password-file missing.pass cannot be read: ENOENT'],
      ['empty.pass', 'INVALID_ARGUMENT: --bmc-password-file empty.pass is empty'],
      ['two.pass', 'INVALID_ARGUMENT: --bmc-password-file two.pass holds more than one line or a NUL byte'],
    ] as const) {
      const failed = await status(enroll(file));
      expect(failed.code).toBe(2);
      expect(failed.err[0]).toBe(message);
    }
    const badMac = await status([...enroll('two.pass'), '--mac', 'zz:zz']);
    expect(badMac.code).toBe(2);
    expect(sent).toEqual([]);
  });

  it('enroll with the file; the answer and the table never hold the password', async () => {
    writeFileSync(join(scratch, 'bmc.pass'), `${PASSWORD}\n`, { mode: 0o600 });
    const out = await run([...enroll('bmc.pass', ['--mac', '52-54-00-AA-BB-01']), '--format', 'compact']);
    const machine = JSON.parse(out[0]!);
    expect(machine).toMatchObject({
      provisionState: 'enroll',
      macs: ['52:54:00:aa:bb:01'],
      bmc: { driver: 'ipmi', address: '10.0.0.7', username: 'admin', passwordSet: true },
    });
    expect(out.join('\n')).not.toContain(PASSWORD);
    const table = (await run(['metal', 'list']))[0]!;
    expect(table.split('\n')[0]).toMatch(/^id\s+name\s+site\s+state\s+power\s+bmc\s+error$/);
    expect(table).toContain(machine.id);
    expect(table).not.toContain(PASSWORD);
    const refused = await status(['metal', 'provide', machine.id]);
    expect(refused.code).not.toBe(0);
    expect(refused.err[0]).toBe(`INVALID_STATE: machine ${machine.id} is enroll; provide needs manageable`);
  });

  it('power and get refuse a bad action or id before sending', async () => {
    sent.length = 0;
    const action = await status(['metal', 'power', 'explode', 'node_01k5w000000000000000000000']);
    expect(action.code).toBe(2);
    expect(action.err[0]).toBe(
      'INVALID_ARGUMENT: action must be one of on, off, reset, status (got "explode")',
    );
    const id = await status(['metal', 'get', 'pool_01k5w00000000000000000000']);
    expect(id.code).toBe(2);
    expect(sent).toEqual([]);
  });
});

describe('metal bulk', () => {
  const PASSWORD = 'cli-bulk-pw-3b7d';
  const machines: string[] = [];
  const MISSING = 'node_01k5w000000000000000000000';

  beforeAll(async () => {
    writeFileSync(join(scratch, 'bulk.pass'), `${PASSWORD}\n`, { mode: 0o600 });
    for (const n of [1, 2, 3]) {
      const machine = await json([
        'metal',
        'enroll',
        `bulk-${n}`,
        '--site',
        siteId,
        '--bmc-driver',
        'ipmi',
        '--bmc-address',
        `10.0.2.${n}`,
        '--bmc-user',
        'admin',
        '--bmc-password-file',
        'bulk.pass',
        '--product-uuid',
        `4c4c4544-0042-3510-8052-b4c04f4a5b0${n}`,
      ]);
      machines.push(machine.id);
    }
  });

  it('refuses a bad list before anything is sent, naming what is wrong', async () => {
    writeFileSync(join(scratch, 'comments.txt'), '# rack 12\n\n   # nothing else\n');
    writeFileSync(join(scratch, 'typo.txt'), `${machines[0]}\nnode-oops # the second\n`);
    writeFileSync(
      join(scratch, 'many.txt'),
      Array.from({ length: 501 }, (_, i) => `node_01k5w${String(i).padStart(21, '0')}`).join('\n'),
    );
    sent.length = 0;
    const base = ['metal', 'bulk', '--verb', 'power-off', '--reason', 'rack 12 PDU swap'];
    for (const [argv, message] of [
      [base, 'INVALID_ARGUMENT: name the machines with one of --nodes or --nodes-file'],
      [
        [...base, '--nodes', machines[0]!, '--nodes-file', 'comments.txt'],
        'INVALID_ARGUMENT: name the machines with one of --nodes or --nodes-file',
      ],
      [
        [...base, '--nodes', `${machines[0]},pool_01k5w00000000000000000000`],
        'INVALID_ARGUMENT: --nodes holds a word that is not a node id (node_01…): "pool_01k5w00000000000000000000"',
      ],
      [
        [...base, '--nodes-file', 'typo.txt'],
        'INVALID_ARGUMENT: typo.txt (--nodes-file) holds a word that is not a node id (node_01…): "node-oops"',
      ],
      [
        [...base, '--nodes-file', 'comments.txt'],
        'INVALID_ARGUMENT: comments.txt (--nodes-file) names no machine',
      ],
      [
        [...base, '--nodes-file', 'many.txt'],
        'INVALID_ARGUMENT: many.txt (--nodes-file) names 501 machines; one bulk call takes at most 500 (one batch)',
      ],
      [[...base, '--nodes-file', 'absent.txt'], 'NOT_FOUND: absent.txt (--nodes-file) is not a file'],
    ] as const) {
      const failed = await status([...argv]);
      expect(failed.code, failed.err.join('\n')).not.toBe(0);
      expect(failed.err[0]).toBe(message);
    }
    const noReason = await status(['metal', 'bulk', '--verb', 'retire', '--nodes', machines[0]!]);
    expect(noReason.code).toBe(2);
    expect(noReason.err[0]).toMatch(/^INVALID_ARGUMENT: .*--reason/);
    const badVerb = await status([
      'metal',
      'bulk',
      '--verb',
      'reboot',
      '--nodes',
      machines[0]!,
      '--reason',
      'x',
    ]);
    expect(badVerb.code).toBe(2);
    expect(sent).toEqual([]);
  });

  it('the server refuses the whole call naming each machine, and nothing changes', async () => {
    const unknown = await status([
      'metal',
      'bulk',
      '--verb',
      'retire',
      '--nodes',
      `${machines[0]},${MISSING}`,
      '--reason',
      'end of life',
    ]);
    expect(unknown.code).toBe(1);
    // The failure's line (after the note of the idempotency key to retry with).
    const failure = (err: string[]) => err.find((line) => /^[A-Z_]+: /.test(line));
    expect(failure(unknown.err)).toBe(`NOT_FOUND: machine ${MISSING} does not exist`);
    const wrong = await status([
      'metal',
      'bulk',
      '--verb',
      'provide',
      '--nodes',
      machines.join(','),
      '--reason',
      'bring-up',
    ]);
    expect(wrong.code).toBe(1);
    expect(failure(wrong.err)).toBe(
      `INVALID_STATE: 3 of 3 machines cannot provide: ${machines.map((id) => `machine ${id} is enroll; provide needs manageable`).join('; ')}`,
    );
    for (const id of machines) expect((await json(['metal', 'get', id])).provisionState).toBe('enroll');
  });

  it('--nodes-file: one id a line, comments and blank lines ignored, duplicates sent once', async () => {
    writeFileSync(
      join(scratch, 'rack.txt'),
      `# rack 12, end of life\n${machines[0]}\n\n${machines[1]}   # u02\n${machines[0]}\n`,
    );
    const { io, out, err } = captureIO(env(), { cwd: scratch });
    await cli.run(
      [
        'metal',
        'bulk',
        '--verb',
        'retire',
        '--nodes-file',
        'rack.txt',
        '--reason',
        'end of life',
        '--format',
        'compact',
      ],
      io,
    );
    const answer = JSON.parse(out[0]!);
    expect(answer).toMatchObject({
      verb: 'retire',
      mode: 'direct',
      batch: null,
      machineIds: machines.slice(0, 2),
    });
    expect(answer.machines.map((m: any) => m.provisionState)).toEqual(['retired', 'retired']);
    expect(err).toContain('Started retire on 2 machine(s); no approval is needed for it here.');
    expect((await json(['metal', 'get', machines[2]!])).provisionState).toBe('enroll');
  });
});

describe('metal discovered and confirm-mac', () => {
  const UUID = '4c4c4544-0042-3510-8052-b4c04f4a4e77';
  let machineId: string;

  beforeAll(async () => {
    await json(['site-tokens', 'create', '--pool', poolId, '--pre-approved', '--out', 'pxe-site.token']);
    const agent = await publicCall('nodes.join', {
      joinToken: readFileSync(join(scratch, 'pxe-site.token'), 'utf8').trim(),
      hostname: 'pxe-agent',
      inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
    });
    writeFileSync(join(scratch, 'pxe.pass'), 'pxe-bmc-pw\n', { mode: 0o600 });
    machineId = (
      await json([
        'metal',
        'enroll',
        'r9-u01',
        '--site',
        siteId,
        '--bmc-driver',
        'ipmi',
        '--bmc-address',
        '10.0.0.9',
        '--bmc-user',
        'admin',
        '--bmc-password-file',
        'pxe.pass',
        '--product-uuid',
        UUID,
      ])
    ).id;
    const at = new Date();
    await recordPxeDiscovery(database.db as never, agent.nodeId, { mac: '52:54:00:00:00:aa' }, at);
    await recordPxeDiscovery(
      database.db as never,
      agent.nodeId,
      { mac: '52:54:00:09:00:01', uuid: UUID },
      at,
    );
  });

  it('discovered prints a table, candidates first; JSON with --format', async () => {
    const table = (await run(['metal', 'discovered', '--site', siteId]))[0]!;
    const lines = table.split('\n');
    expect(lines[0]).toMatch(/^kind\s+mac\s+uuid\s+machine\s+seen\s+last$/);
    expect(lines[1]).toMatch(
      new RegExp(`^candidate\\s+52:54:00:09:00:01\\s+${UUID}\\s+${machineId} \\(r9-u01\\)\\s+1\\s`),
    );
    expect(lines[2]).toMatch(/^unknown\s+52:54:00:00:00:aa\s/);
    const answer = await json(['metal', 'discovered', '--site', siteId]);
    expect(answer.items.map((row: any) => row.kind)).toEqual(['candidate', 'unknown']);
    sent.length = 0;
    const missing = await status(['metal', 'discovered']);
    expect(missing.code).toBe(2);
    expect(sent).toEqual([]);
  });

  it('confirm-mac binds the candidate; the server’s refusals print their codes', async () => {
    const bad = await status(['metal', 'confirm-mac', '--machine', machineId, '--mac', 'zz:zz']);
    expect(bad.code).not.toBe(0);
    expect(bad.err[0]).toMatch(/^INVALID_ARGUMENT: .*mac/);
    const bound = await json(['metal', 'confirm-mac', '--machine', machineId, '--mac', '52-54-00-09-00-01']);
    expect(bound).toMatchObject({ id: machineId, macs: ['52:54:00:09:00:01'] });
    const again = await status([
      'metal',
      'confirm-mac',
      '--machine',
      machineId,
      '--mac',
      '52:54:00:09:00:02',
    ]);
    expect(again.code).not.toBe(0);
    expect(again.err[0]).toMatch(/^INVALID_STATE: machine .* has its MACs already/);
    const table = (await run(['metal', 'discovered', '--site', siteId]))[0]!;
    expect(table.split('\n')[2]).toMatch(/^enrolled\s+52:54:00:09:00:01\s/);
  });
});
