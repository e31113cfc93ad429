/**
 * A provision profile rendered to the files a machine deployed with it receives (docs/profiles.md):
 * the GPT layout for sfdisk and the script that picks the target disk, writes the layout and makes
 * the file systems; fstab; cloud-init's NoCloud user-data and meta-data; the image the deploy agent
 * writes; bcd's join configuration with the join token's reference (never its value); and a
 * manifest with every other file's SHA-256. A pure function of the document, the profile's id and
 * version, and the catalog image it names: the same inputs give the same bytes, with nothing of the
 * clock or the machine in them. Every value a file carries was checked by the document's schema
 * (labels, mounts, device paths, package names and keys have no spaces, quotes or line breaks), and
 * JSON is written where YAML is read (YAML reads JSON), so no value can add a line or a key.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '@better-compute/core';
import type { ProfileDocument } from '@better-compute/core/methods';
import type { ImageRow } from '../vps/tables.js';

/** The format the manifest names, so a deploy agent knows what it reads. */
const RENDER_FORMAT = 'better-compute.profile-render/v1';
/** Where the deploy agent leaves the join token's value for bcd (the metal module fills it). */
const JOIN_TOKEN_FILE = '/etc/better-compute/join-token';

interface RenderedFile {
  path: string;
  mode: string;
  bytes: number;
  sha256: string;
  content: string;
}

export interface RenderInput {
  tenantId: string;
  document: ProfileDocument;
  /** The stored profile rendered, or null for a document that is not stored. */
  profile: { id: string; version: number } | null;
  image: Pick<ImageRow, 'id' | 'name' | 'sha256' | 'disk_format' | 'size_bytes' | 'source' | 'architecture'>;
}

export interface Rendered {
  profileId: string | null;
  version: number | null;
  documentSha256: string;
  manifestSha256: string;
  files: RenderedFile[];
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** SHA-256 of a document's canonical JSON (keys sorted): the same document, the same digest. */
export function documentDigest(document: ProfileDocument): string {
  return sha256(canonicalJson(document));
}

/** JSON with every object's keys sorted, two-space indented, ending in a line break. */
function sortedJson(value: unknown): string {
  const sort = (item: unknown): unknown => {
    if (Array.isArray(item)) return item.map(sort);
    if (item !== null && typeof item === 'object')
      return Object.fromEntries(
        Object.keys(item)
          .sort()
          .map((key) => [key, sort((item as Record<string, unknown>)[key])]),
      );
    return item;
  };
  return `${JSON.stringify(sort(value), null, 2)}\n`;
}

// GPT partition type GUIDs (UEFI specification; the Discoverable Partitions Specification for root).
const GPT_TYPES = {
  esp: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B',
  swap: '0657FD6D-A4AB-43C4-84E5-0933C84B4F4F',
  linux: '0FC63DAF-8483-4772-8E79-3D69D8477DE4',
  rootX86_64: '4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709',
  rootAarch64: 'B921B045-1DF0-41C3-AF44-4C6F280D3FAE',
} as const;

type Partition = ProfileDocument['disk']['partitions'][number];

function partitionType(part: Partition, architecture: string): string {
  if (part.filesystem === 'swap') return GPT_TYPES.swap;
  if (part.filesystem === 'vfat' && part.mount === '/boot/efi') return GPT_TYPES.esp;
  if (part.mount === '/') return architecture === 'aarch64' ? GPT_TYPES.rootAarch64 : GPT_TYPES.rootX86_64;
  return GPT_TYPES.linux;
}

function header(input: RenderInput, comment: string): string {
  const who = input.profile
    ? `profile ${input.document.name} (${input.profile.id} version ${input.profile.version})`
    : `profile ${input.document.name} (not stored)`;
  return `${comment} Rendered by better-compute from ${who}; re-render rather than edit.\n`;
}

function layout(input: RenderInput): string {
  const lines = [header(input, '#').trimEnd(), 'label: gpt', ''];
  for (const part of input.document.disk.partitions) {
    const size = part.sizeMiB === undefined ? '' : `size=${part.sizeMiB}MiB, `;
    lines.push(`${size}type=${partitionType(part, input.image.architecture)}, name="${part.label}"`);
  }
  return `${lines.join('\n')}\n`;
}

function mkfs(part: Partition, device: string): string {
  switch (part.filesystem) {
    case 'ext4':
      return `mkfs.ext4 -F -q -L ${part.label} "${device}"`;
    case 'xfs':
      return `mkfs.xfs -f -q -L ${part.label} "${device}"`;
    case 'btrfs':
      return `mkfs.btrfs -f -q -L ${part.label} "${device}"`;
    case 'vfat':
      return `mkfs.vfat -F 32 -n ${part.label.toUpperCase()} "${device}"`;
    case 'swap':
      return `mkswap -L ${part.label} "${device}"`;
  }
}

/** The shell lines that set DISK: the device path given, or the size rule applied to lsblk's disks. */
function pickDisk(target: ProfileDocument['disk']['target']): string[] {
  if (target.path !== undefined)
    return [
      `DISK=$(readlink -f "${target.path}")`,
      `[ -b "$DISK" ] || fail "${target.path} is not a block device"`,
    ];
  const min = (target.minGiB ?? 0) * 1024 ** 3;
  const max = (target.maxGiB ?? 0) * 1024 ** 3;
  const order = target.bySize === 'largest' ? '-k2,2nr' : '-k2,2n';
  return [
    `# The ${target.bySize} writable disk${target.minGiB ? ` of at least ${target.minGiB} GiB` : ''}${
      target.maxGiB ? ` and at most ${target.maxGiB} GiB` : ''
    }; ties go to the first name.`,
    `DISK=$(lsblk -dbnp -o NAME,SIZE,TYPE,RO | awk -v min=${min} -v max=${max} \\`,
    `  '$3 == "disk" && $4 == 0 && $2 >= min && (max == 0 || $2 <= max) { print $1, $2 }' \\`,
    `  | sort ${order} -k1,1 | head -n 1 | cut -d ' ' -f 1)`,
    `[ -n "$DISK" ] || fail "no disk matches the profile's rule (${target.bySize}, ${target.minGiB ?? 0}-${
      target.maxGiB ?? 'any'
    } GiB)"`,
  ];
}

function partitionScript(input: RenderInput): string {
  const parts = input.document.disk.partitions;
  const lines = [
    '#!/bin/sh',
    header(input, '#').trimEnd(),
    '# Picks the target disk, writes layout.sfdisk (beside this script, or $1) to it and makes the',
    '# file systems; prints the disk it wrote. Everything on the disk is lost. With --which-disk it',
    '# only prints the disk it would write, and changes nothing.',
    'set -eu',
    'fail() { echo "partition.sh: $*" >&2; exit 1; }',
    'WHICH=',
    'if [ "${1:-}" = --which-disk ]; then WHICH=1; shift; fi',
    'LAYOUT="${1:-$(dirname "$0")/layout.sfdisk}"',
    ...pickDisk(input.document.disk.target),
    'if [ -n "$WHICH" ]; then echo "$DISK"; exit 0; fi',
    '# Partition N of a disk whose name ends in a digit is pN (nvme0n1p1), else N (sda1).',
    'case "$DISK" in *[0-9]) PART="${DISK}p" ;; *) PART="$DISK" ;; esac',
    'wipefs --all --force "$DISK" >/dev/null',
    'sfdisk --quiet --wipe always --wipe-partitions always "$DISK" < "$LAYOUT"',
    // sfdisk asks the kernel to re-read the table; a device that does not scan partitions by itself
    // (a loop device) is told of them here. Then wait for their nodes, from udev or devtmpfs.
    'partx --add "$DISK" 2>/dev/null || partx --update "$DISK" 2>/dev/null || true',
    'udevadm settle 2>/dev/null || true',
    `for i in 1 2 3 4 5 6 7 8 9 10; do [ -b "\${PART}${parts.length}" ] && break; sleep 1; done`,
    `[ -b "\${PART}${parts.length}" ] || fail "the partitions of $DISK did not appear"`,
    // Their chatter goes to stderr, so the one line on stdout is the disk written.
    ...parts.map((part, index) => `${mkfs(part, `\${PART}${index + 1}`)} >&2`),
    'echo "$DISK"',
  ];
  return `${lines.join('\n')}\n`;
}

function fstab(input: RenderInput): string {
  const mounted = input.document.disk.partitions
    .filter((part) => part.mount !== undefined)
    // Parents before children: / before /var before /var/lib.
    .sort(
      (a, b) => a.mount!.split('/').length - b.mount!.split('/').length || (a.mount! < b.mount! ? -1 : 1),
    );
  const lines = [header(input, '#').trimEnd()];
  for (const part of mounted) {
    const root = part.mount === '/';
    const options =
      part.filesystem === 'vfat'
        ? 'umask=0077'
        : root && part.filesystem === 'ext4'
          ? 'defaults,errors=remount-ro'
          : 'defaults';
    lines.push(`PARTLABEL=${part.label} ${part.mount} ${part.filesystem} ${options} 0 ${root ? 1 : 2}`);
  }
  for (const part of input.document.disk.partitions.filter((p) => p.filesystem === 'swap'))
    lines.push(`PARTLABEL=${part.label} none swap sw 0 0`);
  return `${lines.join('\n')}\n`;
}

/** The profile's own cloud-config (packages, keys), as JSON after the #cloud-config line. */
function ownCloudConfig(document: ProfileDocument): string {
  const config: Record<string, unknown> = {};
  if (document.packages?.length) {
    config.package_update = true;
    config.packages = document.packages;
  }
  if (document.sshKeys?.length) config.ssh_authorized_keys = document.sshKeys;
  return `#cloud-config\n${JSON.stringify(config)}\n`;
}

/**
 * user-data: the profile's own cloud-config, or with the document's userData a MIME multipart of
 * both (the document's last, merged into the profile's lists rather than replacing them). The
 * boundary is derived from the parts, so it is the same on every render and in neither part.
 */
function userData(document: ProfileDocument): string {
  const own = ownCloudConfig(document);
  if (document.userData === undefined) return own;
  const theirs = document.userData;
  const boundary = `==bc-${sha256(own + theirs).slice(0, 32)}==`;
  const part = (type: string, body: string) =>
    [
      `--${boundary}`,
      `Content-Type: ${type}; charset="utf-8"`,
      'MIME-Version: 1.0',
      'Content-Transfer-Encoding: 8bit',
      ...(type === 'text/cloud-config' ? ['Merge-Type: list(append)+dict(recurse_array)+str()'] : []),
      '',
      body.endsWith('\n') ? body.slice(0, -1) : body,
    ].join('\n');
  const theirType = theirs.startsWith('#!') ? 'text/x-shellscript' : 'text/cloud-config';
  return [
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    'MIME-Version: 1.0',
    '',
    part('text/cloud-config', own),
    part(theirType, theirs),
    `--${boundary}--`,
    '',
  ].join('\n');
}

function metaData(input: RenderInput, digest: string): string {
  // The same instance id for the same profile version, so cloud-init runs once per deployment of it.
  const instanceId = input.profile
    ? `${input.profile.id}-v${input.profile.version}`
    : `profile-${digest.slice(0, 16)}`;
  return `instance-id: ${instanceId}\n`;
}

function joinConfig(input: RenderInput): string {
  return sortedJson({
    tenantId: input.tenantId,
    poolId: input.document.node.poolId,
    labels: input.document.node.labels ?? {},
    joinToken: { reference: input.document.joinTokenRef, file: JOIN_TOKEN_FILE },
  });
}

function imageFile(input: RenderInput): string {
  const root = input.document.disk.partitions.find((part) => part.mount === '/')!;
  return sortedJson({
    id: input.image.id,
    name: input.image.name,
    sha256: input.image.sha256,
    diskFormat: input.image.disk_format,
    sizeBytes: Number(input.image.size_bytes),
    architecture: input.image.architecture,
    source: input.image.source,
    writeTo: `PARTLABEL=${root.label}`,
  });
}

function file(path: string, content: string, mode = '0644'): RenderedFile {
  return { path, mode, bytes: Buffer.byteLength(content, 'utf8'), sha256: sha256(content), content };
}

/** Renders a profile: every file, in path order, and manifest.json last. */
export function renderProfile(input: RenderInput): Rendered {
  const digest = documentDigest(input.document);
  const files = [
    file('bcd/join.json', joinConfig(input)),
    file('cloud-init/meta-data', metaData(input, digest)),
    file('cloud-init/user-data', userData(input.document), '0600'),
    file('disk/layout.sfdisk', layout(input)),
    file('disk/partition.sh', partitionScript(input), '0755'),
    file('etc/fstab', fstab(input)),
    file('image.json', imageFile(input)),
  ];
  const manifest = file(
    'manifest.json',
    sortedJson({
      format: RENDER_FORMAT,
      profile: {
        id: input.profile?.id ?? null,
        name: input.document.name,
        version: input.profile?.version ?? null,
        documentSha256: digest,
      },
      files: files.map(({ path, mode, bytes, sha256: hash }) => ({ path, mode, bytes, sha256: hash })),
    }),
  );
  return {
    profileId: input.profile?.id ?? null,
    version: input.profile?.version ?? null,
    documentSha256: digest,
    manifestSha256: manifest.sha256,
    files: [...files, manifest],
  };
}
