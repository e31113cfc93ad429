/**
 * server.mjs's release pins (lib/settings.mjs, without a browser): CONSOLE_RELEASE_PINS and
 * CONSOLE_RELEASE_THRESHOLD become the deployment's `release` in both modes, and a bad threshold
 * stops the start with a message naming it. (A malformed pin is betterCompute's to refuse at start,
 * INVALID_CONFIG, which server.mjs reports as any configuration error.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const appDir = join(import.meta.dirname, '..');
const settings = (await import(pathToFileURL(join(appDir, 'lib', 'settings.mjs')).href)) as {
  releaseSettings(env: Record<string, string>): { pins: string[]; threshold?: number } | null;
  resolveSettings(
    args: Record<string, unknown>,
    env: Record<string, string>,
    cwd: string,
  ): { release: { pins: string[]; threshold?: number } | null };
};
const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const PIN_A = `sha256/${'a'.repeat(43)}`;
const PIN_B = `sha256/${'b'.repeat(43)}`;

describe('release pins for server.mjs', () => {
  it('reads the pins and the threshold, and none without pins', () => {
    expect(settings.releaseSettings({})).toBeNull();
    expect(settings.releaseSettings({ CONSOLE_RELEASE_PINS: ' , ' })).toBeNull();
    expect(settings.releaseSettings({ CONSOLE_RELEASE_PINS: `${PIN_A}, ${PIN_B}` })).toEqual({
      pins: [PIN_A, PIN_B],
    });
    expect(
      settings.releaseSettings({ CONSOLE_RELEASE_PINS: `${PIN_A},${PIN_B}`, CONSOLE_RELEASE_THRESHOLD: '1' }),
    ).toEqual({ pins: [PIN_A, PIN_B], threshold: 1 });
  });

  it('refuses a threshold it cannot meet, or one without pins, naming the variable', () => {
    for (const threshold of ['0', '3', '1.5', 'two'])
      expect(() =>
        settings.releaseSettings({
          CONSOLE_RELEASE_PINS: `${PIN_A},${PIN_B}`,
          CONSOLE_RELEASE_THRESHOLD: threshold,
        }),
      ).toThrow('CONSOLE_RELEASE_THRESHOLD must be a whole number from 1 to the 2 pinned release key(s)');
    expect(() => settings.releaseSettings({ CONSOLE_RELEASE_THRESHOLD: '1' })).toThrow(
      'CONSOLE_RELEASE_THRESHOLD is set without CONSOLE_RELEASE_PINS',
    );
  });

  it('puts them in the settings of both modes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'console-release-'));
    dirs.push(dir);
    const dev = settings.resolveSettings(
      { mode: 'dev' },
      { CONSOLE_DATA_DIR: dir, CONSOLE_SECRET: 'x'.repeat(32), CONSOLE_RELEASE_PINS: PIN_A },
      dir,
    );
    expect(dev.release).toEqual({ pins: [PIN_A] });
    const prod = settings.resolveSettings(
      { mode: 'prod' },
      {
        CONSOLE_ORIGIN: 'https://console.example.com',
        CONSOLE_SECRET: 'x'.repeat(32),
        CONSOLE_ADMIN_PASSWORD: 'y'.repeat(12),
        BETTER_COMPUTE_DATABASE_URL: 'postgres://db/x',
        CONSOLE_IAM_DATABASE_URL: 'postgres://db/x',
      },
      dir,
    );
    expect(prod.release).toBeNull();
  });
});
