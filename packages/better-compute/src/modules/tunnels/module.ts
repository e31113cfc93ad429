/** The tunnels module: `tunnels.open`. Built per deployment: tickets are signed with its PKI bundle. */
import { tunnelsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { createKeyLoader, type DeploymentKeySettings, type KeyLoader } from '../ssh-certs/keys.js';
import { tunnelsMigrations } from './migrations.js';
import { openTunnel } from './service.js';

export function createTunnelsModule(options: DeploymentKeySettings | { keys: KeyLoader } = {}) {
  const keys = 'keys' in options ? options.keys : createKeyLoader(options);
  return defineModule({
    name: 'tunnels',
    migrations: tunnelsMigrations,
    methods: [implement(tunnelsGroup, { open: (ctx) => openTunnel(keys, ctx) })],
  });
}

export const tunnelsModule = createTunnelsModule();
