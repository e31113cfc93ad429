/**
 * The node's image cache: `<state-dir>/images/<sha256>`, one read-only file per digest. A file is
 * copied from a node path or downloaded from an https URL into a temporary name, hashed as it
 * arrives, and renamed into place only when its size and SHA-256 are the ones the command names;
 * anything else is deleted and the fetch fails saying why. A name in the cache is therefore a
 * verified digest. Concurrent fetches of one digest share one transfer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import type { LookupFunction } from 'node:net';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ADDRESS_KIND_WORDS, classifyHost } from '@better-compute/core';
import type { ImageFile, RuntimeImage } from '@better-compute/core/runtime-commands';

/** A failure whose message is meant for the operator as it stands. */
export class RuntimeError extends Error {}

export class ImageCache {
  private readonly inFlight = new Map<string, Promise<boolean>>();
  constructor(readonly dir: string) {}

  pathOf(sha256: string): string {
    return join(this.dir, sha256);
  }

  /** Fetches every file of an image; `cached` is true when none had to be transferred. */
  async fetchImage(
    image: RuntimeImage,
    signal?: AbortSignal,
  ): Promise<{ cached: boolean; bytes: number; cacheBytes: number }> {
    const files = [image.disk, ...(image.boot ? [image.boot.kernel] : [])];
    if (image.boot?.initrd) files.push(image.boot.initrd);
    let transferred = false;
    for (const file of files) if (await this.fetchFile(file, signal)) transferred = true;
    return {
      cached: !transferred,
      bytes: files.reduce((sum, file) => sum + file.sizeBytes, 0),
      cacheBytes: await this.bytes(),
    };
  }

  /** Makes the file present; true when it was transferred now, false when it was already cached. */
  fetchFile(file: ImageFile, signal?: AbortSignal): Promise<boolean> {
    const running = this.inFlight.get(file.sha256);
    if (running) return running;
    const fetching = this.fetchOnce(file, signal).finally(() => this.inFlight.delete(file.sha256));
    this.inFlight.set(file.sha256, fetching);
    return fetching;
  }

  private async fetchOnce(file: ImageFile, signal?: AbortSignal): Promise<boolean> {
    const target = this.pathOf(file.sha256);
    const present = await stat(target).catch(() => null);
    if (present?.isFile() && present.size === file.sizeBytes) return false;
    if (present) await rm(target, { force: true });
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const partial = join(this.dir, `.partial-${file.sha256}-${randomBytes(4).toString('hex')}`);
    try {
      const hash = createHash('sha256');
      let bytes = 0;
      const measure = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          bytes += chunk.length;
          if (bytes > file.sizeBytes)
            return done(
              new RuntimeError(`${describe(file)} is larger than the ${file.sizeBytes} bytes expected`),
            );
          hash.update(chunk);
          done(null, chunk);
        },
      });
      await pipeline(
        await openSource(file, signal),
        measure,
        createWriteStream(partial, { mode: 0o600 }),
        signal ? { signal } : {},
      );
      if (bytes !== file.sizeBytes)
        throw new RuntimeError(`${describe(file)} has ${bytes} bytes, not the ${file.sizeBytes} expected`);
      const digest = hash.digest('hex');
      if (digest !== file.sha256)
        throw new RuntimeError(
          `${describe(file)} has SHA-256 ${digest}, not the ${file.sha256} expected; the file was discarded`,
        );
      await chmod(partial, 0o400);
      await rename(partial, target);
      return true;
    } catch (error) {
      await rm(partial, { force: true });
      if (error instanceof RuntimeError) throw error;
      if (signal?.aborted) throw new RuntimeError('cancelled while fetching the image');
      throw new RuntimeError(`fetching ${describe(file)} failed: ${(error as Error).message}`);
    }
  }

  /** The bytes the cache holds (finished files only). */
  async bytes(): Promise<number> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    let total = 0;
    for (const name of names) {
      if (!/^[0-9a-f]{64}$/.test(name)) continue;
      const info = await stat(join(this.dir, name)).catch(() => null);
      if (info?.isFile()) total += info.size;
    }
    return total;
  }
}

function describe(file: ImageFile): string {
  const where = file.source.startsWith('https://') ? new URL(file.source).host : file.source;
  return `the image file from ${where.slice(0, 200)}`;
}

/** How names are resolved for a tenant's download; the tests give their own. */
export type ResolveAll = (hostname: string) => Promise<{ address: string; family: number }[]>;
const resolveAll: ResolveAll = (hostname) => lookup(hostname, { all: true, verbatim: true });

/**
 * Where a tenant's file may be fetched from at this hop: an address literal must be public; a name
 * must resolve to public addresses only, and the connection goes to the one checked (so a name
 * that answers otherwise a moment later, DNS rebinding, gains nothing). Null: connect as usual.
 */
async function publicAddress(
  file: ImageFile,
  url: URL,
  resolve: ResolveAll,
): Promise<{ address: string; family: number } | null> {
  const refused = (what: string) =>
    new RuntimeError(
      `${describe(file)}: ${url.host.slice(0, 200)} ${what}, and a tenant's image comes only from public addresses`,
    );
  const host = classifyHost(url.hostname);
  if (host.kind === 'public') return null;
  if (host.kind !== 'name') throw refused(`is ${ADDRESS_KIND_WORDS[host.kind]}`);
  let addresses: { address: string; family: number }[];
  try {
    addresses = await resolve(host.host);
  } catch (error) {
    throw new RuntimeError(
      `${describe(file)}: ${host.host.slice(0, 200)} did not resolve (${(error as Error).message})`,
    );
  }
  if (addresses.length === 0)
    throw new RuntimeError(`${describe(file)}: ${host.host.slice(0, 200)} has no address`);
  for (const { address } of addresses) {
    const kind = classifyHost(address).kind;
    if (kind !== 'public')
      throw refused(`resolves to ${ADDRESS_KIND_WORDS[kind as Exclude<typeof kind, 'public' | 'name'>]}`);
  }
  return addresses[0]!;
}

/** One GET over https, connected to `address` when given; the response whatever its status. */
function get(url: URL, address: { address: string; family: number } | null, signal?: AbortSignal) {
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if (options.all)
      (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [address!]);
    else callback(null, address!.address, address!.family);
  };
  return new Promise<IncomingMessage>((resolve, reject) => {
    const request = httpsGet(
      url,
      { ...(address ? { lookup: pinned, agent: false } : {}), ...(signal ? { signal } : {}) },
      resolve,
    );
    request.on('error', reject);
  });
}

/**
 * A node path is read as it is; an https URL is downloaded, following up to five redirects, to
 * https only; a tenant's file (`publicOnly`) only from public addresses, at every hop.
 */
export async function openSource(
  file: ImageFile,
  signal?: AbortSignal,
  resolve: ResolveAll = resolveAll,
): Promise<Readable> {
  if (file.source.startsWith('/')) {
    const info = await stat(file.source).catch(() => null);
    if (!info?.isFile()) throw new RuntimeError(`${file.source.slice(0, 200)} is not a file on this node`);
    return createReadStream(file.source);
  }
  let url = new URL(file.source);
  for (let hop = 0; hop < 5; hop += 1) {
    const address = file.publicOnly ? await publicAddress(file, url, resolve) : null;
    const response = await get(url, address, signal);
    const status = response.statusCode ?? 0;
    const location = response.headers.location;
    if (status >= 300 && status < 400 && location) {
      response.resume();
      url = new URL(location, url);
      if (url.protocol !== 'https:') throw new RuntimeError(`${describe(file)} redirects away from https`);
      continue;
    }
    if (status < 200 || status >= 300) {
      response.resume();
      throw new RuntimeError(`${describe(file)} answered HTTP ${status}`);
    }
    return response;
  }
  throw new RuntimeError(`${describe(file)} redirects too many times`);
}
