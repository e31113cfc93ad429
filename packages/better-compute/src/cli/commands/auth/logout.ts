/** `auth logout`: forgets a saved profile. It does not revoke the session in Better IAM. */
import { ComputeError } from '@better-compute/core';
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'auth logout',
  group: 'Auth',
  summary: 'Forget a saved profile (the session stays valid in Better IAM)',
  target: 'none',
  flags: {
    profile: {
      type: 'string',
      description: 'The profile to forget (default: BETTER_COMPUTE_PROFILE, else the current one)',
      placeholder: 'NAME',
    },
  },
  examples: ['better-compute auth logout', 'better-compute auth logout --profile ci'],
  async run({ flags, io }) {
    const credentials = await import('../../credentials.js');
    const path = credentials.credentialsPath(io.env);
    const file = await credentials.readCredentials(path);
    const name = credentials.assertProfileName(
      flags.profile ?? (io.env.BETTER_COMPUTE_PROFILE || undefined) ?? file.current ?? 'default',
    );
    if (!Object.hasOwn(file.profiles, name)) {
      throw new ComputeError('NOT_FOUND', `no saved profile "${name}" in ${path}`, {
        hint: 'Run "better-compute auth status" to see the saved profiles.',
      });
    }
    delete file.profiles[name];
    if (file.current === name) file.current = null;
    await credentials.writeCredentials(path, file);
    return { removed: name, path, current: file.current };
  },
});
