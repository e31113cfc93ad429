/**
 * The DHCP requests dnsmasq received, read from the packet dump it writes (`--dumpfile` with
 * `--dumpmask=0x1000`: each DHCPv4 packet as a pcap record, raw IPv4 with its UDP header).
 *
 * dnsmasq's own log (`--log-dhcp`) names the vendor and user class but never the client's UUID
 * (option 97), and its `--dhcp-script` runs only when a lease changes; the dump has every request
 * whole. The file is made here with its pcap header before dnsmasq starts, so dnsmasq opens it for
 * appending and the reader may cut it back to its header once it is large.
 *
 * Everything in a request is unauthenticated: whoever is on the network can send any of it. The
 * text fields are kept short and printable; nothing here decides anything from them.
 */
import { open, type FileHandle } from 'node:fs/promises';

/** A client's DHCP request, as the machine sent it. */
export interface DhcpRequest {
  /** When dnsmasq received it. */
  at: Date;
  mac: string;
  /** The transaction id: the packets of one exchange share it. */
  xid: number;
  type: 'discover' | 'request' | 'decline' | 'release' | 'inform' | 'other';
  /** Option 60, such as `PXEClient:Arch:00000:UNDI:002001`. */
  vendorClass?: string;
  /** Option 77, such as `iPXE`. */
  userClass?: string[];
  /**
   * Option 97, the machine's UUID as its firmware reads it from SMBIOS and as dmidecode and BMCs
   * print it (the first three fields of the wire form are little-endian, as SMBIOS 2.6 stores them).
   */
  uuid?: string;
  /** Option 93, the client's architecture (0 BIOS, 7 and 9 x86-64 UEFI, 16 UEFI HTTP). */
  clientArch?: number;
  /** Option 12, the name the client gives itself. */
  hostname?: string;
}

const PCAP_MAGIC = 0xa1b2c3d4;
const LINKTYPE_ETHERNET = 1;
const LINKTYPE_RAW = 101;
const HEADER_BYTES = 24;
const RECORD_HEADER_BYTES = 16;
const DHCP_MAGIC_COOKIE = 0x63825363;
const TYPES: Record<number, DhcpRequest['type']> = {
  1: 'discover',
  3: 'request',
  4: 'decline',
  7: 'release',
  8: 'inform',
};

/** A pcap file's header as dnsmasq writes it (raw IPv4 records). */
export function pcapHeader(): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32LE(PCAP_MAGIC, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeUInt32LE(65535, 16);
  header.writeUInt32LE(LINKTYPE_RAW, 20);
  return header;
}

/** Short, printable text from unauthenticated bytes. */
function text(bytes: Buffer, limit = 64): string {
  return bytes
    .subarray(0, limit)
    .toString('latin1')
    .replace(/[^\x20-\x7e]/g, '?');
}

/** Option 77: RFC 3004's length-prefixed list, or one plain string as iPXE and many ROMs send it. */
function userClasses(bytes: Buffer): string[] {
  const items: string[] = [];
  for (let at = 0; at < bytes.length;) {
    const length = bytes[at]!;
    if (length === 0 || at + 1 + length > bytes.length) return [text(bytes)];
    items.push(text(bytes.subarray(at + 1, at + 1 + length)));
    at += 1 + length;
  }
  return items.slice(0, 8);
}

/** The canonical UUID of option 97's 16 bytes (type 0 first), SMBIOS byte order. */
export function uuidOfOption97(bytes: Buffer): string | undefined {
  if (bytes.length !== 17 || bytes[0] !== 0) return undefined;
  const raw = bytes.subarray(1);
  const hex = Buffer.concat([
    Buffer.from(raw.subarray(0, 4)).reverse(),
    Buffer.from(raw.subarray(4, 6)).reverse(),
    Buffer.from(raw.subarray(6, 8)).reverse(),
    raw.subarray(8),
  ]).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A BOOTP/DHCP message sent by a client (op 1, Ethernet), or null for anything else. */
export function parseDhcpRequest(payload: Buffer, at: Date): DhcpRequest | null {
  if (payload.length < 240 || payload[0] !== 1 || payload[1] !== 1 || payload[2] !== 6) return null;
  if (payload.readUInt32BE(236) !== DHCP_MAGIC_COOKIE) return null;
  const mac = [...payload.subarray(28, 34)].map((b) => b.toString(16).padStart(2, '0')).join(':');
  const request: DhcpRequest = { at, mac, xid: payload.readUInt32BE(4), type: 'other' };
  for (let at = 240; at < payload.length;) {
    const code = payload[at]!;
    if (code === 255) break;
    if (code === 0) {
      at += 1;
      continue;
    }
    if (at + 1 >= payload.length) break;
    const length = payload[at + 1]!;
    const value = payload.subarray(at + 2, at + 2 + length);
    if (value.length !== length) break;
    if (code === 53 && length === 1) request.type = TYPES[value[0]!] ?? 'other';
    else if (code === 60) request.vendorClass = text(value);
    else if (code === 77) request.userClass = userClasses(value);
    else if (code === 97) {
      const uuid = uuidOfOption97(value);
      if (uuid) request.uuid = uuid;
    } else if (code === 93 && length >= 2) request.clientArch = value.readUInt16BE(0);
    else if (code === 12) request.hostname = text(value);
    at += 2 + length;
  }
  return request;
}

/** The UDP payload of one pcap record, or null when it is not UDP over IPv4. */
function udpPayload(packet: Buffer, linktype: number): Buffer | null {
  let ip = packet;
  if (linktype === LINKTYPE_ETHERNET) {
    if (packet.length < 14 || packet.readUInt16BE(12) !== 0x0800) return null;
    ip = packet.subarray(14);
  } else if (linktype !== LINKTYPE_RAW) return null;
  if (ip.length < 20 || ip[0]! >> 4 !== 4 || ip[9] !== 17) return null;
  const headerBytes = (ip[0]! & 0x0f) * 4;
  if (ip.length < headerBytes + 8) return null;
  return ip.subarray(headerBytes + 8);
}

/** Parses a whole pcap buffer's DHCP client requests (tests and one-off reads). */
export function dhcpRequestsOf(pcap: Buffer): DhcpRequest[] {
  const reader = new PcapReader();
  return reader.push(pcap);
}

/** Reads pcap bytes as they arrive, keeping a partial record for the next chunk. */
export class PcapReader {
  #pending: Buffer = Buffer.alloc(0);
  #linktype: number | null = null;
  #littleEndian = true;
  #nanoseconds = false;

  /** Starts over, as for a file cut back to nothing. */
  reset(): void {
    this.#pending = Buffer.alloc(0);
    this.#linktype = null;
  }

  /** Forgets a partial record, as for a file cut back to its header. */
  dropPartial(): void {
    this.#pending = Buffer.alloc(0);
  }

  push(chunk: Buffer): DhcpRequest[] {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const found: DhcpRequest[] = [];
    if (this.#linktype === null) {
      if (this.#pending.length < HEADER_BYTES) return found;
      const magic = this.#pending.readUInt32LE(0);
      const known: Record<number, [boolean, boolean]> = {
        0xa1b2c3d4: [true, false],
        0xd4c3b2a1: [false, false],
        0xa1b23c4d: [true, true],
        0x4d3cb2a1: [false, true],
      };
      const kind = known[magic];
      if (!kind) throw new Error('the DHCP packet dump is not a pcap file');
      [this.#littleEndian, this.#nanoseconds] = kind;
      this.#linktype = this.#u32(this.#pending, 20);
      this.#pending = this.#pending.subarray(HEADER_BYTES);
    }
    let at = 0;
    while (this.#pending.length - at >= RECORD_HEADER_BYTES) {
      const seconds = this.#u32(this.#pending, at);
      const fraction = this.#u32(this.#pending, at + 4);
      const included = this.#u32(this.#pending, at + 8);
      if (included > 262_144) throw new Error('the DHCP packet dump holds a record larger than any packet');
      if (this.#pending.length - at - RECORD_HEADER_BYTES < included) break;
      const packet = this.#pending.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + included);
      at += RECORD_HEADER_BYTES + included;
      const payload = udpPayload(packet, this.#linktype);
      const when = new Date(seconds * 1000 + Math.floor(fraction / (this.#nanoseconds ? 1e6 : 1e3)));
      const request = payload ? parseDhcpRequest(payload, when) : null;
      if (request) found.push(request);
    }
    this.#pending = Buffer.from(this.#pending.subarray(at));
    return found;
  }

  #u32(buffer: Buffer, at: number): number {
    return this.#littleEndian ? buffer.readUInt32LE(at) : buffer.readUInt32BE(at);
  }
}

/**
 * Follows a growing pcap file and hands each client request to `onRequest`. When the file passes
 * `limitBytes` it is cut back to its header (dnsmasq appends, so it goes on writing from there).
 */
export class DhcpCapture {
  readonly #path: string;
  readonly #onRequest: (request: DhcpRequest) => void;
  readonly #onError: (error: Error) => void;
  readonly #limitBytes: number;
  readonly #interval: number;
  readonly #reader = new PcapReader();
  #file: FileHandle | null = null;
  #offset = 0;
  #timer: NodeJS.Timeout | null = null;
  #reading: Promise<void> | null = null;

  constructor(
    path: string,
    onRequest: (request: DhcpRequest) => void,
    options: { onError?: (error: Error) => void; limitBytes?: number; intervalMs?: number } = {},
  ) {
    this.#path = path;
    this.#onRequest = onRequest;
    this.#onError = options.onError ?? (() => undefined);
    this.#limitBytes = options.limitBytes ?? 8 << 20;
    this.#interval = options.intervalMs ?? 150;
  }

  async start(): Promise<void> {
    this.#file = await open(this.#path, 'r+');
    this.#timer = setInterval(() => void this.poll(), this.#interval);
    this.#timer.unref();
  }

  /** Reads what was added since the last look (also called by the timer). */
  poll(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = null));
    return this.#reading;
  }

  async #read(): Promise<void> {
    const file = this.#file;
    if (!file) return;
    try {
      const { size } = await file.stat();
      if (size < this.#offset) {
        this.#offset = 0;
        this.#reader.reset();
      }
      while (size > this.#offset) {
        const chunk = Buffer.alloc(Math.min(size - this.#offset, 1 << 20));
        const { bytesRead } = await file.read(chunk, 0, chunk.length, this.#offset);
        if (bytesRead === 0) break;
        this.#offset += bytesRead;
        for (const request of this.#reader.push(chunk.subarray(0, bytesRead))) this.#onRequest(request);
      }
      if (this.#offset > this.#limitBytes) {
        // What arrived between the read above and the cut is lost; a PXE client repeats itself.
        await file.truncate(HEADER_BYTES);
        this.#offset = HEADER_BYTES;
        this.#reader.dropPartial();
      }
    } catch (error) {
      this.#onError(error as Error);
    }
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.poll();
    await this.#file?.close();
    this.#file = null;
  }
}
