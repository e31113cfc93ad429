/** What a deployment configures for sandboxes, as the module's handlers and hooks read it. */
import type { DeploymentKeySettings } from '../ssh-certs/keys.js';
import { createKeyLoader, type KeyLoader } from '../ssh-certs/keys.js';
import { createSandboxCaLoader, type SandboxCaLoader } from './keys.js';

export interface SandboxSettings {
  /** Where snapshots are kept: each node's own store (the default), or nowhere (no snapshots). */
  snapshots?: 'node' | false | undefined;
}

export interface SandboxDeps {
  ca: SandboxCaLoader;
  /** The tunnel ticket key, for `sandboxes.exec`. */
  keys: KeyLoader;
  snapshots: 'node' | false;
}

export function sandboxDeps(keySettings: DeploymentKeySettings, settings: SandboxSettings = {}): SandboxDeps {
  return {
    ca: createSandboxCaLoader(keySettings),
    keys: createKeyLoader(keySettings),
    snapshots: settings.snapshots === false ? false : 'node',
  };
}
