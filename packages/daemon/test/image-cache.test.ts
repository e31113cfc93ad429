/**
 * The image cache on its own, on real files: concurrent fetches of one digest share one copy, a
 * cached file is not copied again, a file whose size changed in the cache is fetched afresh, and no
 * partial file outlives a failed fetch.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ImageCache } from '../src/runtimes/index.js';
import { openSource, type ResolveAll } from '../src/runtimes/image-cache.js';

const scratch = mkdtempSync(join(tmpdir(), 'bcd-images-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sourceFile(name: string, bytes: number) {
  const data = randomBytes(bytes);
  const source = join(scratch, name);
  writeFileSync(source, data);
  return { source, sha256: createHash('sha256').update(data).digest('hex'), sizeBytes: bytes };
}

describe('the image cache', () => {
  it('shares one transfer between concurrent fetches of a digest and copies a cached file never again', async () => {
    const cache = new ImageCache(join(scratch, 'cache-a'));
    const file = sourceFile('a.img', 4 << 20);
    const first = cache.fetchFile(file);
    const second = cache.fetchFile(file);
    expect(second).toBe(first);
    expect(await Promise.all([first, second])).toEqual([true, true]);
    expect(readdirSync(cache.dir)).toEqual([file.sha256]);
    expect(await cache.fetchFile(file)).toBe(false);
    expect(await cache.bytes()).toBe(4 << 20);
  });

  it('fetches again a cached file whose size is wrong, and leaves nothing of a failed fetch', async () => {
    const cache = new ImageCache(join(scratch, 'cache-b'));
    const file = sourceFile('b.img', 1024);
    expect(await cache.fetchFile(file)).toBe(true);
    const cached = cache.pathOf(file.sha256);
    chmodSync(cached, 0o600);
    writeFileSync(cached, 'truncated');
    expect(await cache.fetchFile(file)).toBe(true);
    expect(await cache.bytes()).toBe(1024);
    const wrong = { ...file, sha256: createHash('sha256').update('x').digest('hex') };
    await expect(cache.fetchFile(wrong)).rejects.toThrow(/has SHA-256 .* the file was discarded/);
    const short = { ...sourceFile('c.img', 100), sizeBytes: 200 };
    await expect(cache.fetchFile(short)).rejects.toThrow('has 100 bytes, not the 200 expected');
    expect(readdirSync(cache.dir)).toEqual([file.sha256]);
  });

  it('stops a fetch that is cancelled and keeps nothing of it', async () => {
    const cache = new ImageCache(join(scratch, 'cache-c'));
    const file = sourceFile('d.img', 32 << 20);
    const controller = new AbortController();
    const fetching = cache.fetchFile(file, controller.signal);
    controller.abort();
    await expect(fetching).rejects.toThrow('cancelled while fetching the image');
    expect(readdirSync(cache.dir)).toEqual([]);
  });
});

describe("a tenant's image file (publicOnly)", () => {
  const sha256 = createHash('sha256').update('tenant').digest('hex');
  const tenantFile = (source: string) => ({ source, sha256, sizeBytes: 10, publicOnly: true });
  const resolving =
    (addresses: string[]): ResolveAll =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it.each([
    ['https://127.0.0.1:9/disk', 'is a loopback address'],
    ['https://[::ffff:10.0.0.1]/disk', 'is a private address'],
    ['https://0x7f.1/disk', 'is a loopback address'],
    ['https://169.254.169.254/disk', 'is a cloud metadata address'],
    ['https://localhost./disk', 'is a loopback address'],
  ])('refuses %s before connecting: it %s', async (source, words) => {
    const cache = new ImageCache(join(scratch, 'cache-tenant'));
    await expect(cache.fetchFile(tenantFile(source))).rejects.toThrow(
      `${words}, and a tenant's image comes only from public addresses`,
    );
    expect(readdirSync(cache.dir)).toEqual([]);
  });

  it('refuses a name that resolves to any address that is not public, and one that does not resolve', async () => {
    const file = tenantFile('https://mirror.example/disk');
    await expect(openSource(file, undefined, resolving(['10.0.0.5']))).rejects.toThrow(
      'mirror.example resolves to a private address',
    );
    await expect(openSource(file, undefined, resolving(['8.8.8.8', '127.0.0.1']))).rejects.toThrow(
      'resolves to a loopback address',
    );
    await expect(openSource(file, undefined, resolving(['64:ff9b:1::a00:1']))).rejects.toThrow(
      'resolves to a private address',
    );
    await expect(openSource(file, undefined, resolving([]))).rejects.toThrow('mirror.example has no address');
    const failing: ResolveAll = async () => {
      throw new Error('getaddrinfo ENOTFOUND mirror.example');
    };
    await expect(openSource(file, undefined, failing)).rejects.toThrow(
      'did not resolve (getaddrinfo ENOTFOUND',
    );
  });

  it("leaves the platform's own sources alone: a loopback mirror is the operator's choice", async () => {
    const platform = { ...tenantFile('https://127.0.0.1:9/disk'), publicOnly: false };
    // Not refused by the address rule: it gets as far as connecting (and nothing listens on port 9).
    await expect(openSource(platform)).rejects.toThrow(/ECONNREFUSED/);
  });
});
