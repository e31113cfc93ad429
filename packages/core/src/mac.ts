/**
 * MAC addresses in the one form every part stores, compares and shows: six lower-case hex pairs
 * joined by colons (`52:54:00:12:34:56`). People write them in upper case, with `-` (as labels and
 * Windows do) or `:`; both are read. A NIC's address is unicast and not all zeros, so a multicast
 * address (low bit of the first octet set, the broadcast address among them) or 00:00:00:00:00:00
 * is not one.
 */
import { ComputeError } from './errors.js';

const MAC = /^([0-9a-f]{2})([:-])([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})\2([0-9a-f]{2})$/i;

/** The address in its normal form, or null when it is not a NIC's MAC address. */
export function normalizeMac(input: string): string | null {
  if (typeof input !== 'string' || input.length > 64) return null;
  const match = MAC.exec(input.trim());
  if (!match) return null;
  const octets = [match[1], match[3], match[4], match[5], match[6], match[7]].map((o) => o!.toLowerCase());
  if ((parseInt(octets[0]!, 16) & 1) === 1) return null;
  if (octets.every((o) => o === '00')) return null;
  return octets.join(':');
}

/**
 * The address in its normal form; a malformed one is INVALID_ARGUMENT naming `field` and what is
 * wrong, without repeating more than a short, printable prefix of the input.
 */
export function checkMac(input: string, field = 'mac'): string {
  const normal = normalizeMac(input);
  if (normal) return normal;
  const shown =
    typeof input === 'string'
      ? JSON.stringify(input.slice(0, 24).replace(/[^\x20-\x7e]/g, '?'))
      : typeof input;
  const match = typeof input === 'string' && input.length <= 64 ? MAC.exec(input.trim()) : null;
  const why = match
    ? (parseInt(match[1]!, 16) & 1) === 1
      ? "is a multicast address, not a network card's"
      : 'is all zeros'
    : 'is not a MAC address (six hex pairs separated by : or -, like 52:54:00:12:34:56)';
  throw new ComputeError('INVALID_ARGUMENT', `${field} ${shown} ${why}`, {
    details: { field },
    hint: "Give the MAC of the machine's network card as six hex pairs, like 52:54:00:12:34:56.",
  });
}
