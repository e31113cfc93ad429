/**
 * Sandbox volumes on a console: the guest's device path of a volume, and a template's whole volume
 * list with one volume attached or detached, the input `sandboxTemplates.update` takes (the API
 * replaces the list, so both send every other volume as it was). Pure, with no framework.
 */

/** Bytes a virtio-blk serial carries (VIRTIO_BLK_ID_BYTES); a longer serial is cut by QEMU. */
export const VIRTIO_SERIAL_BYTES = 20;

/** A mounted volume as a template lists it. */
export interface TemplateVolume {
  volumeId: string;
  name: string;
  path: string;
  readOnly: boolean;
}

/** One entry of `sandboxTemplates.update`'s `volumes`. */
export interface TemplateVolumeInput {
  volumeId: string;
  path: string;
  readOnly: boolean;
}

/**
 * The virtio serial of a volume: its id without `vol_`, cut to the 20 bytes virtio-blk carries.
 * The ULID's first 20 characters are its time and 50 random bits, so two volumes of a node do not
 * share one.
 *
 * @example volumeSerial('vol_01k5w9z3d8e4f5g6h7j8k9m0n1') // '01k5w9z3d8e4f5g6h7j8'
 */
export function volumeSerial(volumeId: string): string {
  return volumeId.replace(/^vol_/, '').slice(0, VIRTIO_SERIAL_BYTES);
}

/**
 * Where a guest finds the volume as a disk: `/dev/disk/by-id/virtio-<serial>`, the path udev makes
 * from a virtio-blk disk's serial.
 *
 * @example volumeDevicePath('vol_01k5w9z3d8e4f5g6h7j8k9m0n1')
 * // '/dev/disk/by-id/virtio-01k5w9z3d8e4f5g6h7j8'
 */
export function volumeDevicePath(volumeId: string): string {
  return `/dev/disk/by-id/virtio-${volumeSerial(volumeId)}`;
}

/** A mount path the form may send: absolute. The server refuses the rest (`..`, NUL) on its field. */
export function isMountPath(path: string): boolean {
  return path.startsWith('/');
}

const asInput = (volume: TemplateVolume): TemplateVolumeInput => ({
  volumeId: volume.volumeId,
  path: volume.path,
  readOnly: volume.readOnly,
});

/**
 * The template's volume list with `added` mounted last; the index the new entry has, for placing
 * the server's refusal of it (`volumes.<index>.path`) on the form's fields.
 *
 * @example
 * const { volumes, index } = volumesWithAttached(template.volumes, { volumeId, path: '/data', readOnly: false });
 * await client.sandboxTemplates.update({ templateId, volumes, warmMin: 0, warmMax: 0 });
 */
export function volumesWithAttached(
  current: readonly TemplateVolume[],
  added: TemplateVolumeInput,
): { volumes: TemplateVolumeInput[]; index: number } {
  return { volumes: [...current.map(asInput), added], index: current.length };
}

/**
 * The template's volume list without `volumeId`.
 *
 * @example await client.sandboxTemplates.update({ templateId, volumes: volumesWithDetached(template.volumes, volumeId) })
 */
export function volumesWithDetached(
  current: readonly TemplateVolume[],
  volumeId: string,
): TemplateVolumeInput[] {
  return current.filter((volume) => volume.volumeId !== volumeId).map(asInput);
}
