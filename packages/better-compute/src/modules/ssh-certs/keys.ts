/**
 * The PKI bundle's signing keys as a running deployment uses them: the break-glass SSH CA (SSH
 * certificates) and the exec ticket key (tunnel tickets). The bundle is read and each private key
 * unsealed once, on first use (unsealing runs scrypt); a failure is not cached, so fixing the file
 * or the secret needs no restart.
 */
import type { KeyObject } from 'node:crypto';
import { ComputeError } from '@better-compute/core';

export interface DeploymentKeySettings {
  /** The bundle's path (the configuration's `pki`), relative to the working directory. */
  pki?: string | undefined;
  secret?: string | undefined;
}

export interface SigningKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** For SSH CAs: the `ssh-ed25519 AAAA…` line nodes trust. */
  sshPublicKey?: string;
  trustDomain: string;
}

export type KeyName = 'breakGlassSshCa' | 'execTicket';

export function createKeyLoader(settings: DeploymentKeySettings) {
  const loading = new Map<KeyName, Promise<SigningKey>>();

  async function load(name: KeyName): Promise<SigningKey> {
    const { readPkiBundle, resolvePkiPath } = await import('../../pki/bundle.js');
    const { requireSecret } = await import('../../pki/sealing.js');
    let bundle;
    try {
      bundle = await readPkiBundle(resolvePkiPath(process.cwd(), settings.pki));
    } catch (error) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `this deployment has no usable PKI bundle, so it cannot sign ${purposeOf(name)}`,
        {
          hint: 'An operator runs better-compute pki init and sets pki in the configuration (docs/pki.md).',
          cause: error,
        },
      );
    }
    const key = bundle[name];
    return {
      privateKey: await key.privateKey(requireSecret(settings.secret)),
      publicKey: key.publicKey,
      ...(name === 'breakGlassSshCa' ? { sshPublicKey: bundle.breakGlassSshCa.sshPublicKey } : {}),
      trustDomain: bundle.trustDomain,
    };
  }

  return {
    get(name: KeyName): Promise<SigningKey> {
      let pending = loading.get(name);
      if (!pending) {
        pending = load(name);
        loading.set(name, pending);
        pending.catch(() => loading.delete(name));
      }
      return pending;
    },
  };
}

export type KeyLoader = ReturnType<typeof createKeyLoader>;

function purposeOf(name: KeyName): string {
  return name === 'breakGlassSshCa' ? 'break-glass SSH certificates' : 'tunnel tickets';
}
