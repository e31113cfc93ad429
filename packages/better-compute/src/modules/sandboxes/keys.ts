/**
 * The sandbox SSH CA of the deployment's PKI bundle: it certifies each sandbox's host key (so
 * `sandbox exec` pins the guest by the CA, never trust on first use) and signs the short-lived user
 * certificates `sandboxes.exec` grants. Separate from the break-glass CA, so a sandbox certificate
 * never opens a node. The bundle is read and the key unsealed once, on first use; a failure is not
 * cached, so fixing the file or the secret needs no restart.
 */
import type { KeyObject } from 'node:crypto';
import { ComputeError } from '@better-compute/core';
import { newSerial, parseUserPublicKey, signSshCertificate } from '../ssh-certs/certificate.js';
import type { DeploymentKeySettings } from '../ssh-certs/keys.js';

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

// sshd gives no pty to a user certificate without permit-pty; forwarding stays off in the guest.
const USER_EXTENSIONS = ['permit-pty', 'permit-user-rc'];

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
  await parseUserPublicKey(request.publicKey).catch(() => {
    throw new ComputeError('INVALID_ARGUMENT', 'the key to certify is not an OpenSSH public key', {
      details: { field: 'publicKey' },
    });
  });
  return signSshCertificate({
    publicKey: request.publicKey,
    kind: request.kind,
    principals: [request.principal],
    keyId: request.keyId,
    serial: newSerial(),
    validAfter: request.validAfter,
    validBefore: request.validBefore,
    extensions: request.kind === 'user' ? USER_EXTENSIONS : [],
    caPrivateKey: request.ca.privateKey,
  });
}
