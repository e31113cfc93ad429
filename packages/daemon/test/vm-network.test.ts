/**
 * An instance network's arithmetic, without touching the machine: the slots of a range, the
 * addresses and names of a slot, which slot a new instance gets beside the ones a node holds, and
 * the network-config its seed carries. The namespaces and rules themselves are proven on a real
 * guest in qemu-runtime.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/main.js';
import {
  guestNameservers,
  networkConfig,
  networkOf,
  parseRange,
  pickNetwork,
} from '../src/runtimes/vm-network.js';

describe('instance networks', () => {
  it('a range is an aligned IPv4 CIDR from /8 to /29, cut into /29 slots', () => {
    expect(parseRange('10.213.0.0/16')).toEqual({ first: (10 * 256 + 213) * 65536, slots: 8192 });
    expect(parseRange('192.168.8.0/29').slots).toBe(1);
    for (const bad of ['10.213.0.0', '10.213.0.0/30', '10.213.0.0/7', '10.213.1.0/16', '300.1.0.0/16', 'x'])
      expect(() => parseRange(bad), bad).toThrow(/instance range/);
  });

  it('a slot gives the veth link its first /30 and the guest its second; names and MAC are stable', () => {
    const net = networkOf('inst_abc', '10.213.0.0/16', 33);
    expect(net).toEqual({
      slot: 33,
      name: expect.stringMatching(/^bci-[0-9a-f]{10}$/),
      hostAddress: '10.213.1.9',
      peerAddress: '10.213.1.10',
      gateway: '10.213.1.13',
      address: '10.213.1.14',
      mac: '52:54:00:d5:01:0e',
    });
    expect(net.name.length).toBeLessThanOrEqual(15);
    expect(networkOf('inst_abc', '10.213.0.0/16', 0).name).toBe(net.name);
    expect(networkOf('inst_abd', '10.213.0.0/16', 0).name).not.toBe(net.name);
    expect(() => networkOf('inst_abc', '10.213.0.0/16', 8192)).toThrow(/outside/);
  });

  it('a new instance takes the lowest slot neither held nor reserved; a full range says so', () => {
    const range = '10.213.0.0/16';
    const held = [networkOf('inst_a', range, 0), networkOf('inst_b', range, 2)];
    expect(pickNetwork('inst_c', range, held, new Set()).slot).toBe(1);
    expect(pickNetwork('inst_c', range, held, new Set([1])).slot).toBe(3);
    // A network recorded under another range counts where its address lies in this one.
    const elsewhere = networkOf('inst_d', '10.213.0.0/24', 5);
    expect(pickNetwork('inst_c', '10.213.0.0/16', [elsewhere], new Set([0, 1, 2, 3, 4])).slot).toBe(6);
    expect(() =>
      pickNetwork('inst_c', '10.9.0.0/29', [networkOf('inst_a', '10.9.0.0/29', 0)], new Set()),
    ).toThrow(/is full/);
  });

  it('network-config is NoCloud v2 with the MAC, the guest /30, the gateway and the resolvers', () => {
    const net = networkOf('inst_abc', '10.213.0.0/16', 0);
    expect(networkConfig(net, ['192.0.2.53'])).toBe(
      [
        'version: 2',
        'ethernets:',
        '  eth0:',
        '    match:',
        `      macaddress: "${net.mac}"`,
        '    addresses:',
        '      - 10.213.0.6/30',
        '    gateway4: 10.213.0.5',
        '    nameservers:',
        '      addresses: [192.0.2.53]',
        '',
      ].join('\n'),
    );
    expect(networkConfig(net, [])).not.toContain('nameservers');
    const dir = mkdtempSync(join(tmpdir(), 'bcd-resolv-'));
    try {
      writeFileSync(
        join(dir, 'resolv.conf'),
        'nameserver 127.0.0.53\nnameserver 192.0.2.1\nnameserver ::1\n# nameserver 192.0.2.9\nnameserver 192.0.2.2\n',
      );
      // A loopback stub is the node's own (the guest cannot reach it); IPv6 is not given to guests.
      expect(guestNameservers(join(dir, 'resolv.conf'))).toEqual(['192.0.2.1', '192.0.2.2']);
      expect(guestNameservers(join(dir, 'missing'))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('bcd run refuses an instance range that is not one, before it starts', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'bcd-range-'));
    try {
      for (const range of ['10.0.0.0/33', '10.0.0.1/24', 'nonsense\u0000', '300.1.1.0/24']) {
        const errors: string[] = [];
        const status = await main(
          ['run', '--state-dir', stateDir, '--instance-range', range],
          () => {},
          (line) => errors.push(line),
        );
        expect(status).toBe(2);
        expect(errors.join('\n')).toMatch(/^INVALID_ARGUMENT: --instance-range: the instance range /);
        expect(errors.join('\n')).not.toContain('\u0000');
      }
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
