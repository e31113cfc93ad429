/**
 * The console's gateway certificate settings (lib/settings.mjs, without a browser):
 * CONSOLE_GATEWAY_CERT and CONSOLE_GATEWAY_KEY are taken together, against the working directory,
 * and only with a PKI bundle; one without the other, or either without a bundle, stops the start
 * with a message naming what is missing. The files themselves are checked by
 * gatewayTlsFromFiles when server.mjs starts (tunnel-relay.browser.test.ts).
 */
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const appDir = join(import.meta.dirname, '..');
const settings = (await import(pathToFileURL(join(appDir, 'lib', 'settings.mjs')).href)) as {
  gatewayTlsSettings(
    env: Record<string, string>,
    cwd: string,
    pki: string | null,
  ): { certFile: string; keyFile: string } | null;
};

describe('the console’s gateway certificate settings', () => {
  it('are none without either variable, and both files against the working directory', () => {
    expect(settings.gatewayTlsSettings({}, '/srv/console', '/srv/pki.json')).toBeNull();
    expect(
      settings.gatewayTlsSettings(
        { CONSOLE_GATEWAY_CERT: 'tls/gw.crt', CONSOLE_GATEWAY_KEY: '/keys/gw.key' },
        '/srv/console',
        '/srv/pki.json',
      ),
    ).toEqual({ certFile: '/srv/console/tls/gw.crt', keyFile: '/keys/gw.key' });
  });

  it('refuse one file without the other, and a certificate without a PKI bundle', () => {
    expect(() =>
      settings.gatewayTlsSettings({ CONSOLE_GATEWAY_CERT: 'gw.crt' }, '/srv', '/srv/pki.json'),
    ).toThrow(/^CONSOLE_GATEWAY_KEY is not set: the gateway certificate needs both files/);
    expect(() =>
      settings.gatewayTlsSettings({ CONSOLE_GATEWAY_KEY: 'gw.key' }, '/srv', '/srv/pki.json'),
    ).toThrow(/^CONSOLE_GATEWAY_CERT is not set/);
    expect(() =>
      settings.gatewayTlsSettings(
        { CONSOLE_GATEWAY_CERT: 'gw.crt', CONSOLE_GATEWAY_KEY: 'gw.key' },
        '/srv',
        null,
      ),
    ).toThrow('CONSOLE_GATEWAY_CERT needs the PKI bundle whose machine CA signed it; set CONSOLE_PKI');
  });
});
