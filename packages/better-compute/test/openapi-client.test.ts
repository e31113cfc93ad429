/**
 * The OpenAPI document through an independent generator (docs/openapi.md): `openapi-typescript`
 * reads it from a real `serve` over HTTP and writes the API's types; a small program typed by them
 * and sent by `openapi-fetch` is type-checked with `tsc` and run against the same server: a public
 * method, a list, a reserve and a refusal all come back as the types say. A call the types refuse
 * (a field the method does not take, a string for a number) fails to type-check.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPostgresReachable } from '@better-compute/db/testing';
import { serve } from '../src/index.js';
import {
  ACME,
  addNode,
  createFleetDeployment,
  type FleetDeployment,
  l40sx4,
  seedPool,
} from './fleet-support.js';

// The server runs in this process: a child that calls it must be awaited, never run synchronously.
const run = promisify(execFile);

const root = join(import.meta.dirname, '..', '..', '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
// Under the checkout, so the program resolves openapi-fetch from its node_modules.
const work = join(root, 'node_modules', '.cache', `openapi-client-${process.pid}`);

const PROGRAM = `
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

const client = createClient<paths>({ baseUrl: process.env.API_URL! });
const auth = { authorization: \`Bearer \${process.env.TOKEN!}\` };
const version = await client.POST('/api/compute/system/version', { body: {} });
const created = await client.POST('/api/compute/reservations/create', {
  body: { tenantId: 'acme', poolId: process.env.POOL!, gpus: 2, durationSeconds: 3600, idempotencyKey: 'openapi-client-1' },
  headers: auth,
});
const listed = await client.POST('/api/compute/reservations/list', {
  body: { tenantId: 'acme', limit: 10 },
  headers: auth,
});
const missing = await client.POST('/api/compute/reservations/get', {
  body: { tenantId: 'acme', reservationId: 'rsv_00000000000000000000000000' },
  headers: auth,
});
// Typed reads: these lines type-check only if the generated types have these fields.
const gpus: number | undefined = created.data?.data.gpus;
const ids: string[] | undefined = listed.data?.data.items.map((item) => item.id);
const code: string | undefined = missing.error?.error.code;
console.log(JSON.stringify({
  version: version.data?.data.version,
  createdStatus: created.response.status,
  reservation: created.data?.data.id,
  gpus,
  ids,
  missingStatus: missing.response.status,
  code,
}));
`;

/** Calls the types must refuse, one per line from line 6 on. */
const WRONG = `import createClient from 'openapi-fetch';
import type { paths } from './schema.js';
type ListInput = NonNullable<paths['/api/compute/reservations/list']['post']['requestBody']>['content']['application/json'];
const client = createClient<paths>({ baseUrl: 'http://127.0.0.1' });
// Each line below is one error.
await client.POST('/api/compute/reservations/create', { body: { tenantId: 'acme', poolId: 'pool_x', gpus: 'two', durationSeconds: 3600 } });
const listInput: ListInput = { tenantId: 'acme', notAField: true };
await client.POST('/api/compute/no/such-method', { body: {} });
await client.POST('/api/compute/reservations/list', { body: listInput });
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [join(root, 'node_modules', '@types')],
  },
};

function tsc(file: string) {
  writeFileSync(join(work, 'tsconfig.json'), JSON.stringify({ ...TSCONFIG, files: [file, 'schema.d.ts'] }));
  return spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', work], {
    encoding: 'utf8',
  });
}

describe.runIf(await isPostgresReachable())(
  'a client generated from the document by openapi-typescript',
  () => {
    let d: FleetDeployment;
    let api = '';
    let poolId = '';
    const stop = new AbortController();
    let running: Promise<void>;

    beforeAll(async () => {
      mkdirSync(work, { recursive: true });
      writeFileSync(join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }));
      d = await createFleetDeployment('postgres');
      ({ poolId } = await seedPool(d, 'openapi-client'));
      await addNode(d, poolId, 'openapi-client-n1', l40sx4());
      let listening!: (url: string) => void;
      const ready = new Promise<string>((resolve) => (listening = resolve));
      running = serve({
        compute: d.compute,
        port: 0,
        roles: ['api'],
        signal: stop.signal,
        log: () => {},
        onListening: (url) => listening(url),
      });
      api = await Promise.race([ready, running.then(() => '')]);
      // The generator reads the document the server publishes, over HTTP.
      await run(bin('openapi-typescript'), [
        `${api}/api/compute/openapi.json`,
        // A field with a default may be left out of a request: that is what the document says.
        '--default-non-nullable',
        'false',
        '-o',
        join(work, 'schema.d.ts'),
      ]);
    }, 120_000);

    afterAll(async () => {
      stop.abort();
      await running;
      await d?.database.close();
      rmSync(work, { recursive: true, force: true });
    });

    it('type-checks a program using the generated types, which then calls the server as typed', async () => {
      writeFileSync(join(work, 'client.ts'), PROGRAM);
      const checked = tsc('client.ts');
      expect(checked.stdout + checked.stderr).toBe('');
      expect(checked.status).toBe(0);
      execFileSync(
        join(root, 'node_modules', '.bin', 'esbuild'),
        [join(work, 'client.ts'), '--format=esm', '--platform=node', `--outfile=${join(work, 'client.mjs')}`],
        { stdio: 'pipe' },
      );
      const { stdout: out } = await run(process.execPath, [join(work, 'client.mjs')], {
        env: { ...process.env, API_URL: api, TOKEN: ACME, POOL: poolId },
      });
      const result = JSON.parse(out);
      expect(result.version).toMatch(/^\d+\.\d+\.\d+/);
      expect(result.createdStatus).toBe(200);
      expect(result.reservation).toMatch(/^rsv_/);
      expect(result.gpus).toBe(2);
      expect(result.ids).toContain(result.reservation);
      expect(result.missingStatus).toBe(404);
      expect(result.code).toBe('NOT_FOUND');
    });

    it('refuses, at type-check time, what the API would refuse', () => {
      writeFileSync(join(work, 'wrong.ts'), WRONG);
      const checked = tsc('wrong.ts');
      expect(checked.status).not.toBe(0);
      const errors = checked.stdout.split('\n').filter((line) => line.includes('error TS'));
      const onLine = (n: number) => errors.filter((line) => line.includes(`wrong.ts(${n},`));
      // The string for gpus, the unknown field, the unknown path; the last line is a good call.
      expect(onLine(6)).toHaveLength(1);
      expect(onLine(6)[0]).toContain("Type 'string' is not assignable to type 'number'");
      expect(onLine(7)).toHaveLength(1);
      expect(onLine(7)[0]).toContain('notAField');
      expect(onLine(8)).toHaveLength(1);
      expect(onLine(9)).toEqual([]);
      expect(errors).toHaveLength(3);
      expect(checked.stdout.match(/error TS/g)).toHaveLength(3);
    });
  },
);
