/**
 * `releases upload VERSION FILE [--platform P]`: stores a registered release's build with the
 * deployment (releases.upload, 32 KiB a call), so its nodes fetch it through their gateway. The file
 * is checked here against the registered manifest's size and SHA-256 before a byte is sent; a build
 * stored already is left as it is.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';

/** What one releases.upload call carries (the method's RELEASE_UPLOAD_CHUNK_BYTES). */
const PIECE_BYTES = 32_768;
/** The largest build this command reads: far above any bcd bundle. */
const MAX_FILE_BYTES = 256 * 1024 * 1024;

interface Release {
  version: string;
  artifacts: { platform: string; size: number; sha256: string; stored: boolean }[];
}

export default defineCommand({
  name: 'releases upload',
  group: 'Fleet',
  summary: 'Store a registered release’s build with the deployment, for its nodes to fetch (releases.upload)',
  description:
    'The file must have the size and SHA-256 the signed manifest names for the platform; nodes fetch it through their gateway session and check it again against their own pinned keys.',
  target: 'token',
  calls: ['releases.get', 'releases.upload'],
  positionals: [
    { name: 'version', description: 'The registered release, such as 1.4.0', required: true },
    {
      name: 'file',
      description: 'The build: the bcd bundle (dist/bcd.cjs) the manifest names',
      required: true,
    },
  ],
  flags: {
    platform: {
      type: 'string',
      default: 'linux-x64',
      description: 'The platform the build is for, as the manifest names it',
    },
  },
  examples: ['better-compute releases upload 1.4.0 dist/bcd.cjs --platform linux-x64 --tenant root'],
  async run({ args, flags, api, io }) {
    const [{ readFile, stat }, { resolve }, { createHash }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
      import('node:crypto'),
    ]);
    const full = resolve(io.cwd, args.file);
    const info = await stat(full).catch(() => null);
    if (!info?.isFile() || info.size > MAX_FILE_BYTES)
      throw new CliError('NOT_FOUND', `${args.file} is not a build file`, {
        hint: 'Name the bundle the manifest was made from.',
        details: { field: 'file' },
      });
    const bytes = await readFile(full);
    const client = await api();
    const release = (await client.call('releases.get', { version: args.version })) as Release;
    const artifact = release.artifacts.find((a) => a.platform === flags.platform);
    if (!artifact)
      throw new CliError('NOT_FOUND', `release ${release.version} has no build for ${flags.platform}`, {
        hint: `Its manifest names ${release.artifacts.map((a) => a.platform).join(', ')}: pass --platform.`,
        details: { field: 'platform' },
      });
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    if (bytes.length !== artifact.size || sha256 !== artifact.sha256)
      throw new CliError(
        'DIGEST_MISMATCH',
        `${args.file} is ${bytes.length} bytes with SHA-256 ${sha256}; release ${release.version} names ${artifact.size} bytes with ${artifact.sha256}`,
        { hint: 'Upload the exact file the manifest was signed for.', details: { field: 'file' } },
      );
    if (artifact.stored)
      return {
        version: release.version,
        platform: flags.platform,
        stored: artifact.size,
        size: artifact.size,
        complete: true,
      };
    let answer: unknown = null;
    for (let offset = 0; offset < bytes.length; offset += PIECE_BYTES)
      answer = await client.call('releases.upload', {
        version: release.version,
        platform: flags.platform,
        offset,
        data: bytes.subarray(offset, offset + PIECE_BYTES).toString('base64'),
      });
    return answer;
  },
});
