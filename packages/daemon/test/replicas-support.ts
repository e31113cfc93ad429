/**
 * A deployment split in replicas for the stream and mTLS suites: a PKI bundle in a scratch
 * directory (where `serve` finds it by the default rule), gateway certificates from its machine
 * CA, an API and controllers replica on plain http, and gateway replicas serving mutual TLS, each
 * its own `better-compute serve` process on the test's PostgreSQL database.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PkiBundle } from '../../better-compute/src/pki/bundle.js';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import { issueGatewayCertificate } from '../../better-compute/src/pki/issue.js';
import type { GatewayTls } from '../../better-compute/src/gateway/tls.js';
import { root, until, type Proc } from './daemon-support.js';

const serverBin = join(root, 'packages', 'better-compute', 'bin', 'better-compute.cjs');
export const SECRET = 'replica-suite-deployment-secret';

export interface Pki {
  bundle: PkiBundle;
  caFile: string;
  /** A gateway certificate for 127.0.0.1, written to files and held as the link's TLS. */
  gateway(name: string): Promise<{ certFile: string; keyFile: string; tls: GatewayTls }>;
}

export async function scratchPki(dir: string): Promise<Pki> {
  mkdirSync(join(dir, '.better-compute'), { recursive: true });
  const bundle = await createPkiBundle({ path: join(dir, '.better-compute', 'pki.json'), secret: SECRET });
  const caFile = join(dir, 'machine-ca.pem');
  writeFileSync(caFile, bundle.machineCa.certificatePem);
  return {
    bundle,
    caFile,
    async gateway(name) {
      const issued = await issueGatewayCertificate(bundle, SECRET, '127.0.0.1');
      const certFile = join(dir, `${name}.crt`);
      const keyFile = join(dir, `${name}.key`);
      writeFileSync(certFile, issued.certificatePem);
      writeFileSync(keyFile, issued.privateKeyPem, { mode: 0o600 });
      return {
        certFile,
        keyFile,
        tls: {
          certificatePem: issued.certificatePem,
          privateKeyPem: issued.privateKeyPem,
          caPems: [bundle.machineCa.certificatePem],
        },
      };
    },
  };
}

/** `better-compute serve` in `cwd` (so the bundle there is found), until it listens. */
export async function replica(cwd: string, databaseUrl: string, args: string[]): Promise<Proc> {
  const child: ChildProcess = spawn(process.execPath, [serverBin, 'serve', ...args], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      BETTER_COMPUTE_DATABASE_URL: databaseUrl,
      BETTER_COMPUTE_SECRET: SECRET,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  const err: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) =>
    out.push(...chunk.toString('utf8').split('\n').filter(Boolean)),
  );
  child.stderr!.on('data', (chunk: Buffer) =>
    err.push(...chunk.toString('utf8').split('\n').filter(Boolean)),
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const proc = { child, out, err, exited };
  await until(
    `serve ${args.join(' ')} to listen`,
    async () => {
      if (child.exitCode !== null) throw new Error(`serve exited: ${err.join('\n')}`);
      return err.concat(out).some((line) => line.includes('serving'));
    },
    30_000,
  );
  return proc;
}
