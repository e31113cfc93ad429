/**
 * The sandbox SSH CA of the deployment's PKI bundle: it certifies each sandbox's host key (so
 * `sandbox exec` pins the guest by the CA, never trust on first use) and signs the short-lived user
 * certificates `sandboxes.exec` grants. Separate from the break-glass CA, so a sandbox certificate
 * never opens a node. The bundle is read and the key unsealed once, on first use; a failure is not
 * cached, so fixing the file or the secret needs no restart.
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import type { DeploymentKeySettings } from '../ssh-certs/keys.js';

type Sshpk = typeof import('sshpk');

async function sshpk(): Promise<Sshpk> {
  const loaded = (await import('sshpk')) as Sshpk & { default?: Sshpk };
  return loaded.default ?? loaded;
}

export interface SandboxCa {
  privateKey: KeyObject;
  /** `ssh-ed25519 AAAA… sandbox-ssh-ca`, what guests trust for users and clients pin for hosts. */
  sshPublicKey: string;
}

const NO_CA_HINT =
  'An operator runs better-compute pki add-sandbox-ca; the next call reads the bundle again, no restart needed.';

export function createSandboxCaLoader(settings: DeploymentKeySettings) {
  let pending: Promise<SandboxCa> | undefined;

  async function load(): Promise<SandboxCa> {
    const { readPkiBundle, resolvePkiPath } = await import('../../pki/bundle.js');
    const { requireSecret } = await import('../../pki/sealing.js');
    let bundle;
    try {
      bundle = await readPkiBundle(resolvePkiPath(process.cwd(), settings.pki));
    } catch (error) {
      throw new ComputeError(
        'INVALID_CONFIG',
        'this deployment has no usable PKI bundle, so it cannot certify sandboxes',
        {
          hint: 'An operator runs better-compute pki init and sets pki in the configuration (docs/pki.md).',
          cause: error,
        },
      );
    }
    if (!bundle.sandboxSshCa)
      throw new ComputeError(
        'INVALID_CONFIG',
        'the PKI bundle has no sandbox SSH CA, so sandboxes cannot start',
        {
          details: { reason: 'no-sandbox-ca' },
          hint: NO_CA_HINT,
        },
      );
    return {
      privateKey: await bundle.sandboxSshCa.privateKey(requireSecret(settings.secret)),
      sshPublicKey: bundle.sandboxSshCa.sshPublicKey,
    };
  }

  return {
    get(): Promise<SandboxCa> {
      if (!pending) {
        pending = load();
        pending.catch(() => (pending = undefined));
      }
      return pending;
    },
  };
}

export type SandboxCaLoader = ReturnType<typeof createSandboxCaLoader>;

const USER_EXTENSIONS = ['permit-pty', 'permit-user-rc'];

interface OpensshSignature {
  keyId?: string;
  exts?: { name: string; critical: boolean; data: Buffer }[];
}

/**
 * Signs an OpenSSH certificate for `publicKey` naming one principal, the sandbox id: a host
 * certificate for the sandbox's own host key, or a user certificate for a caller's key.
 */
export async function signSandboxCertificate(request: {
  ca: SandboxCa;
  kind: 'host' | 'user';
  publicKey: string;
  principal: string;
  keyId: string;
  validAfter: Date;
  validBefore: Date;
}): Promise<string> {
  const lib = await sshpk();
  let subjectKey;
  try {
    subjectKey = lib.parseKey(request.publicKey.trim(), 'ssh');
  } catch {
    throw new ComputeError('INVALID_ARGUMENT', 'the key to certify is not an OpenSSH public key', {
      details: { field: 'publicKey' },
    });
  }
  const caKey = lib.parsePrivateKey(
    request.ca.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    'pem',
  );
  const serial = randomBytes(8);
  serial[0] = serial[0]! & 0x7f;
  const subject =
    request.kind === 'host' ? lib.identityForHost(request.principal) : lib.identityForUser(request.principal);
  const certificate = lib.createCertificate(
    subject,
    subjectKey,
    lib.identityForHost('sandbox-ssh-ca'),
    caKey,
    {
      validFrom: request.validAfter,
      validUntil: request.validBefore,
      serial,
    },
  );
  const openssh = (certificate as unknown as { signatures: { openssh: OpensshSignature } }).signatures
    .openssh;
  openssh.keyId = request.keyId;
  // sshd gives no pty to a user certificate without permit-pty; forwarding stays off in the guest.
  if (request.kind === 'user')
    openssh.exts = USER_EXTENSIONS.map((name) => ({ name, critical: false, data: Buffer.alloc(0) }));
  certificate.signWith(caKey);
  return certificate.toString('openssh').trim();
}
