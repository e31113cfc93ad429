/**
 * `images register --name N --source PATH|URL --disk-format F --os OS [--sha256 H --size BYTES]
 * [--kernel PATH --initrd PATH --cmdline TEXT] [--channel C] [--key KEY]`: images.register. The
 * digest and size of a file the CLI can read are computed here when not given.
 */
import { defineCommand, nameFlag } from '../../define.js';
import { CliError } from '../../errors.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';
import { fileFacts } from './shared.js';

const sha = (what: string) =>
  ({
    type: 'string',
    description: `The ${what}'s SHA-256 (computed when the file is here)`,
    placeholder: 'HEX',
  }) as const;
const size = (what: string) =>
  ({
    type: 'number',
    integer: true,
    min: 1,
    description: `The ${what}'s size in bytes`,
    placeholder: 'BYTES',
  }) as const;

export default defineCommand({
  name: 'images register',
  group: 'VPS',
  summary: 'Register an image: its disk (and a direct-boot kernel) with digests (images.register)',
  target: 'token',
  calls: ['images.register'],
  flags: {
    name: nameFlag('Its name in your catalog (debian-12)'),
    source: {
      type: 'string',
      required: true,
      description: 'The disk: an absolute path on the nodes, or an https:// URL',
      placeholder: 'PATH|URL',
    },
    diskFormat: {
      type: 'string',
      choices: ['qcow2', 'raw'],
      required: true,
      description: 'The disk’s format',
    },
    sha256: sha('disk'),
    size: size('disk'),
    os: {
      type: 'string',
      required: true,
      description: 'Its operating system (debian-12)',
      placeholder: 'OS',
    },
    architecture: {
      type: 'string',
      choices: ['x86_64', 'aarch64'],
      description: 'Its architecture (x86_64)',
    },
    channel: {
      type: 'string',
      choices: ['testing', 'stable', 'deprecated'],
      description: 'Its channel (testing)',
    },
    kernel: { type: 'string', description: 'A kernel to boot directly (vmlinux)', placeholder: 'PATH|URL' },
    kernelSha256: sha('kernel'),
    kernelSize: size('kernel'),
    initrd: {
      type: 'string',
      description: 'The initramfs of the direct-boot kernel',
      placeholder: 'PATH|URL',
    },
    initrdSha256: sha('initramfs'),
    initrdSize: size('initramfs'),
    cmdline: { type: 'string', description: 'The direct-boot kernel’s command line', placeholder: 'TEXT' },
    key: keyFlag,
  },
  examples: [
    'better-compute images register --name debian-12 --source /var/lib/images/debian.raw --disk-format raw --os debian-12 --kernel /var/lib/images/vmlinux --initrd /var/lib/images/initrd.img --cmdline "console=ttyS0 root=/dev/vda"',
    'better-compute images register --name ubuntu-24 --source https://images.example.com/ubuntu.qcow2 --disk-format qcow2 --os ubuntu-24.04 --sha256 3f1c… --size 612368384',
  ],
  async run(context) {
    const { flags, api, commandName } = context;
    if ((flags.initrd || flags.cmdline !== undefined) && !flags.kernel)
      throw new CliError('INVALID_ARGUMENT', '--initrd and --cmdline go with --kernel; nothing was sent', {
        hint: `Run "better-compute help ${commandName}" for its flags.`,
        details: { field: 'kernel' },
      });
    const disk = await fileFacts(commandName, 'source', flags.source, {
      sha256: flags.sha256,
      size: flags.size,
    });
    const boot = flags.kernel
      ? {
          kernel: await fileFacts(commandName, 'kernel', flags.kernel, {
            sha256: flags.kernelSha256,
            size: flags.kernelSize,
          }),
          initrd: flags.initrd
            ? await fileFacts(commandName, 'initrd', flags.initrd, {
                sha256: flags.initrdSha256,
                size: flags.initrdSize,
              })
            : null,
          cmdline: flags.cmdline ?? '',
        }
      : undefined;
    return withIdempotencyKey(context, flags.key, async (idempotencyKey) =>
      (await api()).call('images.register', {
        name: flags.name,
        source: disk.source,
        sha256: disk.sha256,
        sizeBytes: disk.sizeBytes,
        diskFormat: flags.diskFormat,
        os: flags.os,
        ...defined({ architecture: flags.architecture, channel: flags.channel, boot }),
        idempotencyKey,
      }),
    );
  },
});
