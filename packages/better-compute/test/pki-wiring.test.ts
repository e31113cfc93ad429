/**
 * The bundle in the server: `serve` with a configured `pki` signs with the bundle's command root
 * (a node's session is welcomed with that key), refuses to start when the secret does not open it,
 * and `dev` keeps its command root in a sealed bundle, adopting the key of an older
 * `.better-compute/command-root.pem` so a daemon that pinned it keeps working. serve records the
 * bundle's pins in the database, and doctor tells a rotated bundle from a swapped one.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestDatabase } from '@better-compute/db/testing';
import { betterCompute, generatedCommandSigner, serve } from '../src/index.js';
import { publicKeyPin, readPkiBundle } from '../src/pki/bundle.js';
import { createPkiBundle } from '../src/pki/create.js';
import { rotateCommandRoot } from '../src/pki/rotation.js';
import { sql } from 'kysely';
import { devCommandSigner } from '../src/host/dev-command-root.js';

const secret = 'the wiring test deployment secret';
const dir = mkdtempSync(join(tmpdir(), 'bc-pki-wire-'));

async function call<T = any>(
  url: string,
  method: string,
  body: Record<string, unknown>,
  key?: string,
): Promise<T> {
  const response = await fetch(`${url}/api/compute/${method.replaceAll('.', '/')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as { data?: T; error?: { code: string } };
  if (answer.error) throw new Error(answer.error.code);
  return answer.data as T;
}

function welcome(url: string, credential: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/api/compute/gateway/session`, {
      headers: { authorization: `Bearer ${credential}` },
    });
    ws.on('error', reject);
    ws.on('unexpected-response', (_request, response) => reject(new Error(`status ${response.statusCode}`)));
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (message.t === 'ready') {
        ws.send(
          JSON.stringify({
            t: 'hello',
            version: '0.1.0',
            capabilities: [],
            inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
          }),
        );
        return;
      }
      ws.close();
      resolve(message);
    });
  });
}

describe('serve with a configured PKI bundle', () => {
  it('welcomes a node with the bundle’s command root, and refuses to start when the secret does not open it', async () => {
    const path = join(dir, 'serve', 'pki.json');
    const bundle = await createPkiBundle({ path, secret });
    const database = await createTestDatabase();
    try {
      const wrong = await betterCompute(
        { database, pki: path, secret: 'a different secret entirely', rateLimit: false },
        { log: () => {} },
      );
      await wrong.migrate();
      const key = (await wrong.embeddedIam!.bootstrapDev())!.rootAdmin.apiKey;
      await expect(
        serve({
          compute: wrong,
          port: 0,
          roles: ['gateway'],
          signal: new AbortController().signal,
          log: () => {},
        }),
      ).rejects.toMatchObject({ code: 'PKI_UNSEAL_FAILED' });

      const compute = await betterCompute(
        { database, pki: path, secret, rateLimit: false },
        { log: () => {} },
      );
      const controller = new AbortController();
      let url = '';
      const listening = new Promise<void>((resolve) => {
        const running = serve({
          compute,
          port: 0,
          roles: ['api', 'gateway'],
          signal: controller.signal,
          log: () => {},
          onListening: (u) => {
            url = u;
            resolve();
          },
        });
        void running.catch(() => undefined);
      });
      await listening;
      try {
        const site = await call(url, 'sites.create', { tenantId: 'root', name: 's' }, key);
        const pool = await call(url, 'pools.create', { tenantId: 'root', siteId: site.id, name: 'p' }, key);
        const { token } = await call(
          url,
          'joinTokens.create',
          { tenantId: 'root', poolId: pool.id, uses: 1, preApproved: true },
          key,
        );
        const joined = await call(url, 'nodes.join', {
          joinToken: token,
          hostname: 'n1',
          inventory: { cpuCores: 1, memoryGiB: 1, gpus: [] },
        });
        const message = await welcome(url, joined.nodeCredential);
        expect(message.t).toBe('welcome');
        expect(publicKeyPin(createPublicKey(message.commandRoot))).toBe(bundle.commandRoot.pin);

        // serve recorded the pins; doctor compares the bundle with them.
        const pinsCheck = async () =>
          (await compute.doctor({ pkiPath: path })).findings.find((finding) => finding.check === 'pki.pins');
        const { rows } = await sql<{ purpose: string; pin: string }>`
          select purpose, pin from compute.pki_pins order by purpose`.execute(database.db);
        expect(rows).toEqual([
          { purpose: 'audit', pin: bundle.audit!.pin },
          { purpose: 'command-root', pin: bundle.commandRoot.pin },
        ]);
        expect(await pinsCheck()).toMatchObject({ severity: 'ok' });
        // A rotation the old root signed still matches the recorded pin.
        await rotateCommandRoot(path, secret);
        expect(await pinsCheck()).toMatchObject({ severity: 'ok' });
        // A bundle swapped for another one does not.
        await createPkiBundle({ path, secret, force: true });
        expect(await pinsCheck()).toMatchObject({
          severity: 'error',
          message: expect.stringContaining('the bundle was replaced'),
        });
      } finally {
        controller.abort();
      }
    } finally {
      await database.close();
    }
  });
});

describe('dev’s command root', () => {
  it('makes a sealed bundle on the first start and signs with its command root after a restart', async () => {
    const stateDir = join(dir, 'dev-new', '.better-compute');
    mkdirSync(stateDir, { recursive: true });
    const first = await devCommandSigner(stateDir, { secret });
    expect(statSync(join(stateDir, 'pki.json')).mode & 0o777).toBe(0o600);
    const again = await devCommandSigner(stateDir, { secret });
    expect(again.publicKeyPem).toBe(first.publicKeyPem);
    expect(publicKeyPin(createPublicKey(first.publicKeyPem))).toBe(
      (await readPkiBundle(join(stateDir, 'pki.json'))).commandRoot.pin,
    );
  });

  it('adopts the key of an older command-root.pem and removes the loose file', async () => {
    const stateDir = join(dir, 'dev-old', '.better-compute');
    mkdirSync(stateDir, { recursive: true });
    const old = generatedCommandSigner();
    writeFileSync(join(stateDir, 'command-root.pem'), old.privateKeyPem, { mode: 0o600 });
    const signer = await devCommandSigner(stateDir, { secret });
    expect(signer.publicKeyPem).toBe(old.publicKeyPem);
    expect(existsSync(join(stateDir, 'command-root.pem'))).toBe(false);
    const bundle = await readPkiBundle(join(stateDir, 'pki.json'));
    expect(bundle.commandRoot.pin).toBe(publicKeyPin(createPrivateKey(old.privateKeyPem)));
  });

  it('gives a bundle made before the sandbox SSH CA one, keeping its other keys', async () => {
    const stateDir = join(dir, 'dev-no-sandbox-ca', '.better-compute');
    mkdirSync(stateDir, { recursive: true });
    const path = join(stateDir, 'pki.json');
    await createPkiBundle({ path, secret, trustDomain: 'dev.localhost' });
    const document = JSON.parse(readFileSync(path, 'utf8'));
    delete document.sandboxSshCa;
    writeFileSync(path, JSON.stringify(document), { mode: 0o600 });
    const before = await readPkiBundle(path);
    expect(before.sandboxSshCa).toBeUndefined();
    await devCommandSigner(stateDir, { secret });
    const after = await readPkiBundle(path);
    expect(after.sandboxSshCa?.sshPublicKey).toMatch(/^ssh-ed25519 /);
    expect(after.commandRoot.pin).toBe(before.commandRoot.pin);
    expect(after.breakGlassSshCa.pin).toBe(before.breakGlassSshCa.pin);
  });
});
