/**
 * The daemon's side of node certificates, on a real state directory and certificates from a real
 * machine CA: what it keeps (only a certificate for its node and its key, signed by a CA sent with
 * it), when it asks again (none, expired, or two thirds of its life gone), and what a session
 * presents and trusts.
 */
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@better-compute/core';
import { createPkiBundle } from '../../better-compute/src/pki/create.js';
import type { PkiBundle } from '../../better-compute/src/pki/bundle.js';
import { issueNodeCertificate } from '../../better-compute/src/pki/issue.js';
import { newP256Key } from '../../better-compute/src/pki/certificates.js';
import { acceptCertificate, certificateDue, ensureNodeKey, tlsOptionsFor } from '../src/certificate.js';
import { StateDir } from '../src/state.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-cert-'));
const secret = 'certificate-suite-secret';
const nodeId = newId('node');
let bundle: PkiBundle;
let other: PkiBundle;
let state: StateDir;

const issue = async (
  options: {
    for?: string;
    key?: ReturnType<typeof createPublicKey>;
    from?: PkiBundle;
    days?: number;
    now?: Date;
  } = {},
) => {
  const from = options.from ?? bundle;
  const issued = await issueNodeCertificate(from, secret, {
    nodeId: options.for ?? nodeId,
    publicKey: options.key ?? createPublicKey(ensureNodeKey(state).publicKeyPem),
    ...(options.days ? { days: options.days } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  return {
    t: 'certificate',
    certificatePem: issued.certificatePem,
    caCertificates: [from.machineCa.certificatePem],
  };
};

beforeAll(async () => {
  bundle = await createPkiBundle({ path: join(scratch, 'a', 'pki.json'), secret });
  other = await createPkiBundle({ path: join(scratch, 'b', 'pki.json'), secret });
  state = new StateDir(join(scratch, 'state'));
  state.saveIdentity({
    url: 'https://127.0.0.1:1/api/compute',
    nodeId,
    nodeCredential: `${nodeId}.secret`,
    commandRoot: null,
  });
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the node certificate in the state directory', () => {
  it('keeps the key pair 0600 and makes it once', () => {
    const key = ensureNodeKey(state);
    expect(ensureNodeKey(state)).toEqual(key);
    expect(statSync(join(state.dir, 'node-key.json')).mode & 0o777).toBe(0o600);
    expect(certificateDue(state)).toBe(true);
  });

  it('refuses a certificate for another node, for another key, or with no CA that signed it', async () => {
    expect(acceptCertificate(state, nodeId, await issue({ for: newId('node') }))).toBe(
      'the certificate names another node',
    );
    expect(acceptCertificate(state, nodeId, await issue({ key: createPublicKey(newP256Key()) }))).toBe(
      'the certificate is not for this node key',
    );
    const mixed = { ...(await issue({ from: other })), caCertificates: [bundle.machineCa.certificatePem] };
    expect(acceptCertificate(state, nodeId, mixed)).toBe('no CA sent with it signed the certificate');
    expect(acceptCertificate(state, nodeId, { t: 'certificate', certificatePem: 'garbage\u0000' })).toBe(
      'the certificate does not parse',
    );
    expect(state.certificate()).toBeNull();
  });

  it('keeps a good one 0600, presents it on TLS sessions with the CAs, and asks again two thirds into its life', async () => {
    expect(acceptCertificate(state, nodeId, await issue())).toBeNull();
    expect(statSync(join(state.dir, 'certificate.json')).mode & 0o777).toBe(0o600);
    expect(certificateDue(state)).toBe(false);
    const options = tlsOptionsFor(state, 'wss://127.0.0.1:1/api/compute/gateway/session');
    expect(options.cert).toBe(state.certificate()!.certificatePem);
    expect(options.key).toBe(state.nodeKey()!.privateKeyPem);
    expect(options.ca).toEqual([bundle.machineCa.certificatePem]);
    expect(tlsOptionsFor(state, 'ws://127.0.0.1:1/api/compute/gateway/session')).toEqual({});
    const held = state.certificate()!;
    const life = Date.parse(held.notAfter) - Date.parse(held.notBefore);
    expect(certificateDue(state, new Date(Date.parse(held.notBefore) + life * 0.6))).toBe(false);
    expect(certificateDue(state, new Date(Date.parse(held.notBefore) + life * 0.7))).toBe(true);
    // Expired: asked for again, and no longer presented.
    const after = new Date(Date.parse(held.notAfter) + 1000);
    expect(certificateDue(state, after)).toBe(true);
    expect(tlsOptionsFor(state, 'wss://x/api/compute/gateway/session', after).cert).toBeUndefined();
  });
});
