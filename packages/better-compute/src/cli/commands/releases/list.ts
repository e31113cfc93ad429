/** `releases list [--limit N] [--cursor C]`: releases.list, newest first, a table by default. */
import { defineCommand } from '../../define.js';
import { listResult, pageFlags, pageOf } from '../shared.js';

interface ReleaseRow {
  id: string;
  version: string;
  minimumVersion: string;
  artifacts: { platform: string }[];
  signers: string[];
  registeredAt: string;
}

export default defineCommand({
  name: 'releases list',
  group: 'Fleet',
  summary: 'List the registered bcd releases, newest first (releases.list)',
  target: 'token',
  calls: ['releases.list'],
  flags: { ...pageFlags },
  defaultFormat: 'table',
  examples: ['better-compute releases list --tenant root', 'better-compute releases list --format json'],
  async run({ flags, api, global }) {
    const page = await (await api()).call('releases.list', pageOf(flags));
    return listResult({ global }, page, (release: ReleaseRow) => ({
      id: release.id,
      version: release.version,
      minimumVersion: release.minimumVersion,
      platforms: release.artifacts.map((artifact) => artifact.platform).join(','),
      signers: release.signers.length,
      registeredAt: release.registeredAt,
    }));
  },
});
