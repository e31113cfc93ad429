/**
 * The profiles module: `profiles.*`, provision profiles of bare-metal machines (docs/profiles.md).
 * Built per deployment with the seam the metal module fills: whether a machine uses a profile.
 */
import type { AuthorizationCheck } from '@better-compute/core';
import { profilesGroup, SECRETS_USE_ACTION } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../../db/tables.js';
import { defineModule, implement, type MethodBinding } from '../define-module.js';
import { parseSecretReference } from '../secrets/index.js';
import { profilesMigrations } from './migrations.js';
import {
  createProfile,
  deleteProfile,
  getProfile,
  listProfiles,
  noProfileInUse,
  type ProfileInUse,
  renderStoredOrGiven,
  updateProfile,
  validateProfile,
} from './service.js';

/**
 * Naming a join token secret in a profile hands its value to every machine deployed with it, so it
 * is decided on the secret (compute:secrets:use), as a sandbox template's env is. Another tenant's
 * reference is refused by the method itself.
 */
async function secretChecks(
  _db: Kysely<ComputeTables>,
  tenantId: string,
  input: unknown,
): Promise<AuthorizationCheck[]> {
  const reference = (input as { document?: { joinTokenRef?: string } }).document?.joinTokenRef;
  const parsed = reference === undefined ? null : parseSecretReference(reference);
  return parsed && parsed.tenantId === tenantId
    ? [{ action: SECRETS_USE_ACTION, resource: { type: 'compute-secret', id: parsed.id, tenantId } }]
    : [];
}

function createProfilesModule(options: { profileInUse?: ProfileInUse } = {}) {
  const profiles = implement(profilesGroup, {
    list: listProfiles,
    get: getProfile,
    validate: validateProfile,
    render: renderStoredOrGiven,
    create: createProfile,
    update: updateProfile,
    delete: deleteProfile(options.profileInUse ?? noProfileInUse),
  });
  for (const binding of profiles.bindings as MethodBinding[])
    if (binding.method.name === 'create' || binding.method.name === 'update') binding.checks = secretChecks;
  return defineModule({ name: 'profiles', migrations: profilesMigrations, methods: [profiles] });
}

/** The module as the method table's coverage is checked against; no machine uses a profile yet. */
export const profilesModule = createProfilesModule();
