/**
 * The quorum's byte encodings: every signed or hashed message is built from length-prefixed fields,
 * so no two different inputs share an encoding (never a JSON.stringify of an object, whose key order
 * and escapes are nobody's contract). Pure: no node:crypto here.
 */

const utf8 = new TextEncoder();

/** A message under construction: big-endian integers and length-prefixed strings and bytes. */
export class ByteWriter {
  private readonly parts: Uint8Array[] = [];
  private length = 0;

  private push(part: Uint8Array): this {
    this.parts.push(part);
    this.length += part.length;
    return this;
  }

  u8(value: number): this {
    return this.push(Uint8Array.of(value & 0xff));
  }

  u32(value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff)
      throw new RangeError(`${value} is not a u32`);
    const part = new Uint8Array(4);
    new DataView(part.buffer).setUint32(0, value);
    return this.push(part);
  }

  /** A whole number up to 2^53 - 1 in eight bytes. */
  u64(value: number): this {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${value} is not a u64`);
    const part = new Uint8Array(8);
    new DataView(part.buffer).setBigUint64(0, BigInt(value));
    return this.push(part);
  }

  /** Raw bytes of a length both sides know (a 32-byte root). */
  fixed(bytes: Uint8Array): this {
    return this.push(bytes);
  }

  /** u32 length, then the bytes. */
  bytes(bytes: Uint8Array): this {
    return this.u32(bytes.length).push(bytes);
  }

  /** u32 length, then the UTF-8. Callers check the string is well formed (see isWellFormedText). */
  text(value: string): this {
    return this.bytes(utf8.encode(value));
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const part of this.parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }
}

/**
 * A string with no lone surrogate (TextEncoder would turn each into U+FFFD, so two different
 * strings would encode alike) and no control character (it would print as something else).
 */
export function isWellFormedText(value: unknown, max: number): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) return false;
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(value)) return false;
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value);
}

export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0');
  return out;
}

/** Lowercase hex of exactly `size` bytes, else null. */
export function fromHex(text: unknown, size: number): Uint8Array | null {
  if (typeof text !== 'string' || text.length !== size * 2 || !/^[0-9a-f]*$/.test(text)) return null;
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = Number.parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return out;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

export function toBase64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** Unpadded base64url that decodes and re-encodes to itself (one spelling per value), else null. */
export function fromBase64url(text: unknown, maxBytes: number): Uint8Array | null {
  if (typeof text !== 'string' || text.length > Math.ceil((maxBytes * 4) / 3) || !B64URL.test(text))
    return null;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? new Uint8Array(bytes) : null;
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Milliseconds of an instant written exactly as `Date.prototype.toISOString` writes it, else null. */
export function parseInstant(text: unknown): number | null {
  if (typeof text !== 'string' || !ISO_INSTANT.test(text)) return null;
  const ms = Date.parse(text);
  return Number.isSafeInteger(ms) && ms >= 0 && new Date(ms).toISOString() === text ? ms : null;
}
