/**
 * `bcd run --pxe-dir`'s reporting, without root: the provisioning network's discovery callback
 * becomes `pxe.discovered { mac, uuid? }` on the session, one report per MAC waits while the session
 * is down (at most MAX_PENDING) and goes once it is back, stop stops the network, and a node that is
 * not a site agent is refused before anything starts; metal.boot-entries sets exactly the MACs it
 * lists and removes the rest, and refuses a malformed list; a ramdisk entry boots the agent's
 * ramdisk with a one-time token, and only a report carrying it is sent as metal.report. The network
 * itself is metal-lab.test.ts's and metal-site.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import type { DiscoveryEvent, ProvisioningNetwork, ProvisioningNetworkOptions } from '../src/metal/index.js';
import { applyBootEntries, MAX_PENDING, startSiteProvisioning } from '../src/metal/site-provisioning.js';

/**
 * Stands in for ProvisioningNetwork.start: keeps the options it was given, counts stops, and keeps
 * boot entries in a map as the real one does (its files are metal-lab.test.ts's to check).
 */
function fakeStart() {
  const seen: { options?: ProvisioningNetworkOptions; stops: number; entries: Map<string, unknown> } = {
    stops: 0,
    entries: new Map(),
  };
  const start = async (options: ProvisioningNetworkOptions) => {
    seen.options = options;
    return {
      serverAddress: '10.77.0.1',
      stop: async () => {
        seen.stops += 1;
      },
      bootEntries: () => new Map(seen.entries),
      setBootEntry: async (mac: string, entry: unknown) => {
        if (entry === null) seen.entries.delete(mac);
        else seen.entries.set(mac, entry);
      },
    } as unknown as ProvisioningNetwork;
  };
  return { seen, start };
}

const event = (mac: string, uuid?: string): DiscoveryEvent => ({
  mac,
  at: new Date(),
  type: 'discover',
  ...(uuid ? { uuid } : {}),
});

describe('a site agent’s provisioning network under bcd run', () => {
  it('is nothing without --pxe-dir, and refused on a node that is not a site agent', async () => {
    const { seen, start } = fakeStart();
    const io = { siteAgent: false, send: () => true, log: () => {} };
    expect(await startSiteProvisioning(undefined, io, start)).toBeNull();
    await expect(startSiteProvisioning({ dir: '/var/lib/bc-pxe' }, io, start)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringContaining('not a site agent'),
    });
    expect(seen.options).toBeUndefined();
  });

  it('sends each discovery as pxe.discovered; keeps them while the session is down', async () => {
    const { seen, start } = fakeStart();
    const sent: Record<string, unknown>[] = [];
    let up = true;
    const logged: string[] = [];
    const pxe = (await startSiteProvisioning(
      { dir: '/var/lib/bc-pxe', subnet: '10.77.0.0/24', uplinks: ['tap-pxe'] },
      { siteAgent: true, send: (m) => (up ? (sent.push(m), true) : false), log: (l) => logged.push(l) },
      start,
    ))!;
    expect(seen.options).toMatchObject({
      dir: '/var/lib/bc-pxe',
      subnet: '10.77.0.0/24',
      uplinks: ['tap-pxe'],
    });
    const report = seen.options!.onDiscovery;
    report(event('52:54:00:12:34:56', '4c4c4544-0042-3510-8052-b4c04f4a4e31'));
    expect(sent).toEqual([
      { t: 'pxe.discovered', mac: '52:54:00:12:34:56', uuid: '4c4c4544-0042-3510-8052-b4c04f4a4e31' },
    ]);
    up = false;
    report(event('52:54:00:00:00:01'));
    report(event('52:54:00:00:00:01'));
    for (let i = 0; i < MAX_PENDING + 5; i++)
      report(
        event(
          `52:54:00:01:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`,
        ),
      );
    expect(pxe.pending()).toBe(MAX_PENDING);
    expect(logged.filter((l) => l.includes('newer ones are dropped'))).toHaveLength(1);
    up = true;
    // The next report, or the retry timer, sends what waited, in order; each MAC once.
    report(event('52:54:00:00:00:01'));
    expect(pxe.pending()).toBe(0);
    expect(sent[1]).toEqual({ t: 'pxe.discovered', mac: '52:54:00:00:00:01' });
    expect(sent).toHaveLength(1 + MAX_PENDING);
    await pxe.stop();
    expect(seen.stops).toBe(1);
  });

  it('metal.boot-entries sets what it lists, removes the rest, and refuses a malformed list', async () => {
    expect(await applyBootEntries(null, { entries: [] })).toMatchObject({
      state: 'failed',
      error: 'this agent runs no provisioning network (bcd run --pxe-dir)',
    });
    const { seen, start } = fakeStart();
    const pxe = (await startSiteProvisioning(
      { dir: '/var/lib/bc-pxe' },
      { siteAgent: true, send: () => true, log: () => {} },
      start,
    ))!;
    seen.entries.set('52:54:00:00:00:01', 'local-disk');
    const set = await applyBootEntries(pxe, {
      entries: [
        { mac: '52:54:00:12:34:56', boot: 'local-disk' },
        { mac: '52:54:00:aa:bb:08', boot: 'local-disk' },
      ],
    });
    expect(set).toMatchObject({ state: 'succeeded', result: { entries: 2, removed: 1 } });
    expect([...seen.entries.keys()].sort()).toEqual(['52:54:00:12:34:56', '52:54:00:aa:bb:08']);
    for (const bad of [
      { entries: [{ mac: '52-54-00-12-34-56', boot: 'local-disk' }] },
      { entries: [{ mac: '52:54:00:12:34:56', boot: 'network' }] },
      { entries: [{ mac: '52:54:00:12:34:56', boot: 'local-disk', kernel: '/etc/shadow' }] },
      { entries: [{ mac: '52:54:00:12:34:56', boot: 'local-disk' }], more: 1 },
      { entries: [{ mac: '52:54:00:12:34:56', boot: 'ramdisk', purpose: 'shell' }] },
      { entries: [{ mac: '52:54:00:12:34:56', boot: 'ramdisk' }] },
      { entries: Array.from({ length: 2 }, () => ({ mac: '52:54:00:12:34:56', boot: 'local-disk' })) },
      null,
    ])
      expect(await applyBootEntries(pxe, bad)).toMatchObject({
        state: 'failed',
        error: 'the boot entries are malformed',
      });
    expect(seen.entries.size).toBe(2);
  });

  it('a ramdisk entry boots the agent’s ramdisk with a token of its own; only a report with it is sent', async () => {
    const MAC = '52:54:00:12:34:56';
    const { seen, start } = fakeStart();
    const sent: Record<string, unknown>[] = [];
    const logged: string[] = [];
    const io = {
      siteAgent: true,
      send: (m: Record<string, unknown>) => (sent.push(m), true),
      log: (l: string) => logged.push(l),
    };
    const bare = (await startSiteProvisioning({ dir: '/var/lib/bc-pxe' }, io, start))!;
    const inspect = { entries: [{ mac: MAC, boot: 'ramdisk', purpose: 'inspect' }] };
    // Without --ramdisk-dir the entry is refused, naming what to run.
    expect((await applyBootEntries(bare, inspect)).error).toContain(
      'this agent has none: run bcd with --ramdisk-dir DIR',
    );
    const pxe = (await startSiteProvisioning(
      { dir: '/var/lib/bc-pxe', ramdisk: { kernel: '/rd/vmlinuz', initrd: '/rd/initrd.gz' } },
      io,
      start,
    ))!;
    expect(await applyBootEntries(pxe, inspect)).toMatchObject({
      state: 'succeeded',
      result: { entries: 1, ramdisks: 1, removed: 0 },
    });
    const entry = seen.entries.get(MAC) as { kernel: string; initrd: string; cmdline: string };
    expect(entry).toMatchObject({ kernel: '/rd/vmlinuz', initrd: '/rd/initrd.gz' });
    expect(entry.cmdline).toMatch(
      /^console=tty0 console=ttyS0 bc\.purpose=inspect bc\.report=http:\/\/10\.77\.0\.1\/cgi-bin\/report bc\.token=[0-9a-f]{32}$/,
    );
    const token = /bc\.token=([0-9a-f]{32})/.exec(entry.cmdline)![1]!;
    // The same command again keeps the token: a ramdisk already booting is not stranded.
    await applyBootEntries(pxe, inspect);
    expect((seen.entries.get(MAC) as { cmdline: string }).cmdline).toContain(token);
    const inventory = { cpu: { count: 2 } };
    const post = seen.options!.onReport!;
    // A wrong token, another MAC, another purpose, garbage: dropped, nothing sent.
    post(
      JSON.stringify({
        mac: MAC,
        token: token.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')),
        purpose: 'inspect',
        inventory,
      }),
    );
    post(JSON.stringify({ mac: '52:54:00:00:00:02', token, purpose: 'inspect', inventory }));
    post('{"mac":');
    post(JSON.stringify({ mac: MAC, token, purpose: 'inspect', inventory: [] }));
    expect(sent).toEqual([]);
    expect(logged.filter((l) => l.includes('without a valid token'))).toHaveLength(4);
    // The right one, with the MAC as the ramdisk spells it, is sent once; its token is then spent.
    post(JSON.stringify({ mac: MAC.toUpperCase(), token, purpose: 'inspect', inventory }));
    post(JSON.stringify({ mac: MAC, token, purpose: 'inspect', inventory }));
    expect(sent).toEqual([{ t: 'metal.report', mac: MAC, purpose: 'inspect', inventory }]);
    // Back to the disk: the entry changes, and a new inspection gets a new token.
    await applyBootEntries(pxe, { entries: [{ mac: MAC, boot: 'local-disk' }] });
    expect(seen.entries.get(MAC)).toBe('local-disk');
    await applyBootEntries(pxe, inspect);
    expect((seen.entries.get(MAC) as { cmdline: string }).cmdline).not.toContain(token);
    // Cleaning: a token of its own, and its findings relayed from their own field.
    await applyBootEntries(pxe, { entries: [{ mac: MAC, boot: 'ramdisk', purpose: 'clean' }] });
    const clean = (seen.entries.get(MAC) as { cmdline: string }).cmdline;
    expect(clean).toContain('bc.purpose=clean');
    const cleanToken = /bc\.token=([0-9a-f]{32})/.exec(clean)![1]!;
    const cleaning = { systemUuid: null, disks: [], failed: null };
    post(JSON.stringify({ mac: MAC, token: cleanToken, purpose: 'clean', inventory }));
    post(JSON.stringify({ mac: MAC, token: cleanToken, purpose: 'inspect', cleaning }));
    expect(sent).toHaveLength(1);
    post(JSON.stringify({ mac: MAC, token: cleanToken, purpose: 'clean', cleaning }));
    expect(sent[1]).toEqual({ t: 'metal.report', mac: MAC, purpose: 'clean', cleaning });
  });
});
