/**
 * The secrets module: `secrets.*`, write-only values of a tenant (docs/secrets.md). Built per
 * deployment: it seals under the deployment's secret.
 */
import { secretsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { secretsMigrations } from './migrations.js';
import { createSecretSealer } from './sealing.js';
import { deleteSecret, getSecret, listSecrets, putSecret } from './service.js';

export function createSecretsModule(deploymentSecret?: string) {
  const sealer = createSecretSealer(deploymentSecret);
  return defineModule({
    name: 'secrets',
    migrations: secretsMigrations,
    methods: [
      implement(secretsGroup, {
        list: listSecrets,
        get: getSecret,
        put: putSecret(sealer),
        delete: deleteSecret,
      }),
    ],
  });
}

/** The module without a deployment secret: what the method table's coverage is checked against. */
export const secretsModule = createSecretsModule();
