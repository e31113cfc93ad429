/**
 * The break-glass SSH module: `nodes.issueSshCert`, `nodes.listSshCerts` and
 * `nodes.revokeSshCert`. Built per deployment: it signs with the deployment's PKI bundle.
 */
import { nodeSshCertsGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { createKeyLoader, type DeploymentKeySettings } from './keys.js';
import { sshCertsMigrations } from './migrations.js';
import { issueSshCert, listSshCerts, revokeSshCert } from './service.js';

export interface SshCertsModuleSettings extends DeploymentKeySettings {
  /** Whether issuing needs a session opened with a second factor (default true). */
  requireMfa?: boolean | undefined;
}

export function createSshCertsModule(options: SshCertsModuleSettings = {}) {
  const settings = { keys: createKeyLoader(options), requireMfa: options.requireMfa !== false };
  return defineModule({
    name: 'ssh-certs',
    migrations: sshCertsMigrations,
    methods: [
      implement(nodeSshCertsGroup, {
        issueSshCert: (ctx) => issueSshCert(settings, ctx),
        listSshCerts,
        revokeSshCert: (ctx) => revokeSshCert(settings, ctx),
      }),
    ],
  });
}

/** The module with the default settings: what the method table's coverage is checked against. */
export const sshCertsModule = createSshCertsModule();
