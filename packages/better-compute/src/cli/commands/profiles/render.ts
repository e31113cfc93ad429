/**
 * `profiles render (PROFILE | --file PATH) [--out DIR]`: profiles.render, the exact files a machine
 * deployed with the profile receives. With --out they are written into DIR, a new directory (an
 * existing one is ALREADY_EXISTS), each with its mode, and the manifest is printed; without it the
 * render is printed whole.
 */
import { defineCommand } from '../../define.js';
import { CliError } from '../../errors.js';
import { fileFlag, profileNamed, readProfileDocument, type RenderedProfile, writeRender } from './shared.js';

export default defineCommand({
  name: 'profiles render',
  group: 'Nodes',
  summary:
    'The exact files a machine deployed with a profile receives: layout, partition script, fstab, cloud-init, bcd join config, manifest (profiles.render)',
  description:
    'The same profile version renders the same bytes every time; its manifest lists every other file with its SHA-256. ' +
    'The join token is named by its reference only. --file renders a document that is not stored.',
  target: 'token',
  calls: ['profiles.render'],
  positionals: [{ name: 'profile', description: 'The profile’s name or id (prof_…); or give --file' }],
  flags: {
    file: {
      ...fileFlag,
      description: 'Render this document instead of a stored profile; - reads standard input',
    },
    out: { type: 'string', description: 'Write the files into this new directory', placeholder: 'DIR' },
  },
  examples: [
    'better-compute profiles render gpu-worker --out ./gpu-worker',
    'better-compute profiles render --file gpu-worker.json --out ./preview',
  ],
  async run({ args, flags, io, api, commandName }) {
    if ((args.profile === undefined) === (flags.file === undefined))
      throw new CliError('INVALID_ARGUMENT', 'give exactly one of a PROFILE and --file PATH', {
        details: { field: 'profile' },
        hint: `Run "better-compute help ${commandName}" for its flags and examples.`,
      });
    if (flags.out !== undefined) {
      const [{ stat }, { resolve }] = await Promise.all([import('node:fs/promises'), import('node:path')]);
      // Refused before the call, so a taken directory costs nothing; written below without replacing either way.
      if (await stat(resolve(io.cwd, flags.out)).catch(() => null))
        throw new CliError(
          'ALREADY_EXISTS',
          `${flags.out} already exists; a render is written only into a new directory`,
          {
            details: { field: 'out' },
            hint: 'Pass --out the name of a directory that does not exist yet, or move the existing one away.',
          },
        );
    }
    const input =
      args.profile !== undefined
        ? profileNamed(args.profile)
        : { document: (await readProfileDocument(io, commandName, flags.file)) as never };
    const rendered = (await (await api()).call('profiles.render', input)) as RenderedProfile;
    if (flags.out === undefined) return rendered;
    const root = await writeRender(io, flags.out, rendered);
    return {
      out: root,
      profileId: rendered.profileId,
      version: rendered.version,
      documentSha256: rendered.documentSha256,
      manifestSha256: rendered.manifestSha256,
      files: rendered.files.map(({ path, mode, bytes, sha256 }) => ({ path, mode, bytes, sha256 })),
    };
  },
});
