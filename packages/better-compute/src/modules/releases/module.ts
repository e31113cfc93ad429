/**
 * The releases module: `releases.*`, signed bcd release manifests (docs/releases.md). Built per
 * deployment: it verifies what is registered against the configuration's `release` pins and
 * threshold, read once at start (a mistake there is INVALID_CONFIG before anything is served).
 */
import { releasesGroup } from '@better-compute/core/methods';
import { defineModule, implement } from '../define-module.js';
import { uploadArtifact } from './artifacts.js';
import { releasesMigrations } from './migrations.js';
import {
  getRelease,
  listReleases,
  registerRelease,
  type ReleaseSettings,
  releaseTrustOf,
  rotateReleasePins,
} from './releases.js';

export type { ReleaseSettings } from './releases.js';

export function createReleasesModule(settings?: ReleaseSettings) {
  const trust = releaseTrustOf(settings);
  return defineModule({
    name: 'releases',
    migrations: releasesMigrations,
    methods: [
      implement(releasesGroup, {
        register: (ctx) => registerRelease(trust, ctx),
        upload: uploadArtifact,
        list: listReleases,
        get: getRelease,
        rotatePins: (ctx) => rotateReleasePins(trust, ctx),
      }),
    ],
  });
}

/** The module without pins: what the method table's coverage is checked against. */
export const releasesModule = createReleasesModule();
