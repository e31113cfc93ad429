/**
 * What a machine on the provisioning network is told to boot, as the iPXE scripts it fetches.
 *
 * Every machine is handed the same first script (`boot.ipxe`, over TFTP from the DHCP answer, or
 * over HTTP). It fetches `nodes/<mac>.ipxe` (the MAC as iPXE's `${mac:hexhyp}`, `52-54-00-12-34-56`):
 * a machine the caller gave a boot entry runs it; any other is sent to `discover.ipxe`, which boots
 * the discovery image when the site has one and otherwise waits and returns to the firmware. Nothing
 * there binds the machine to anything: it is only reported (provisioning-network.ts).
 *
 * iPXE expands `${…}` in every line it runs and reads `||`, `&&` and `#` as its own, so a kernel
 * command line is limited to characters that mean nothing to it; the scripts add `BOOTIF=${mac}`
 * themselves, the way pxelinux and Ironic's iPXE templates tell a ramdisk which card it booted from.
 */
import { ComputeError } from '@better-compute/core';

/** A network boot: a kernel, an optional initramfs and the kernel's command line. */
export interface NetworkBoot {
  /** A file on this machine; the service copies it into what it serves. */
  kernel: string;
  initrd?: string;
  cmdline?: string;
}

/** A machine's boot entry: boot over the network, or from its own disk. */
export type BootEntry = NetworkBoot | 'local-disk';

/** The longest command line taken (Linux on x86 keeps 2048 bytes; the scripts add their own). */
export const CMDLINE_LIMIT = 1024;

const CMDLINE = /^[A-Za-z0-9 ._,:=/+@%~^*?!()[\]{}-]*$/;

/** A kernel command line iPXE passes on as it is; anything it would read otherwise is refused. */
export function checkCmdline(cmdline: string): string {
  if (typeof cmdline !== 'string')
    throw new ComputeError('INVALID_ARGUMENT', 'the kernel command line must be a string');
  if (Buffer.byteLength(cmdline) > CMDLINE_LIMIT)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `the kernel command line is longer than ${CMDLINE_LIMIT} bytes`,
    );
  if (!CMDLINE.test(cmdline)) {
    const bad = [...cmdline].find((c) => !CMDLINE.test(c)) ?? '';
    const shown = /^[\x21-\x7e]$/.test(bad)
      ? `'${bad}'`
      : `U+${bad.codePointAt(0)!.toString(16).padStart(4, '0')}`;
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `the kernel command line holds ${shown}, which iPXE would read as its own`,
      {
        hint: 'Use letters, digits, spaces and . _ , : = / + @ % ~ ^ * ? ! ( ) [ ] { } - only; no $ | & # ; quotes or backslashes.',
      },
    );
  }
  return cmdline.trim().replace(/ {2,}/g, ' ');
}

/** The name of a MAC's script, as iPXE's `${mac:hexhyp}` spells it: `52-54-00-12-34-56`. */
export function entryFileName(normalMac: string): string {
  return `${normalMac.replace(/:/g, '-')}.ipxe`;
}

/** The first script every machine runs. */
export function bootScript(base: string): string {
  return [
    '#!ipxe',
    '# better-compute provisioning network: the entry of this MAC, else discovery',
    `imgfetch --name entry ${base}/nodes/\${mac:hexhyp}.ipxe || goto unknown`,
    'imgexec entry || goto failed',
    ':unknown',
    `chain --autofree ${base}/discover.ipxe || goto failed`,
    ':failed',
    'echo better-compute: booting from the network failed; back to the firmware in 10 s',
    'sleep 10',
    'exit',
    '',
  ].join('\n');
}

/** The script of one MAC's entry; `files` names where its kernel and initramfs are served. */
export function entryScript(
  entry: 'local-disk' | { kernelUrl: string; initrdUrl?: string; cmdline: string },
): string {
  if (entry === 'local-disk')
    return [
      '#!ipxe',
      'echo better-compute: ${mac} boots from its local disk',
      'sanboot --no-describe --drive 0x80 || exit',
      '',
    ].join('\n');
  return [
    '#!ipxe',
    'echo better-compute: booting the entry of ${mac}',
    `kernel ${entry.kernelUrl} ${entry.cmdline} BOOTIF=\${mac}`.replace(/ {2,}/g, ' '),
    ...(entry.initrdUrl ? [`initrd ${entry.initrdUrl}`] : []),
    'boot',
    '',
  ].join('\n');
}

/** The script of every MAC without an entry: the discovery image, or back to the firmware. */
export function discoveryScript(
  image: { kernelUrl: string; initrdUrl?: string; cmdline: string } | null,
): string {
  if (!image)
    return [
      '#!ipxe',
      'echo better-compute: ${mac} has no boot entry on this network; it is reported, and nothing binds it by itself',
      'sleep 20',
      'exit',
      '',
    ].join('\n');
  return [
    '#!ipxe',
    'echo better-compute: ${mac} has no boot entry; booting the discovery image',
    `kernel ${image.kernelUrl} ${image.cmdline} BOOTIF=\${mac}`.replace(/ {2,}/g, ' '),
    ...(image.initrdUrl ? [`initrd ${image.initrdUrl}`] : []),
    'boot',
    '',
  ].join('\n');
}
