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
