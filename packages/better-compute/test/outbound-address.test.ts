/**
 * The one outbound address check (`classifyHost`, packages/core/src/outbound-address.ts), held to a
 * table of spellings written from the RFCs: every IPv4 spelling inet_aton and WHATWG URLs accept,
 * every IPv6 form that carries an IPv4 address, the IPv6 special ranges, zone ids, and host names
 * with their case and trailing dots. Then the same spellings through the real handler: webhooks.create
 * and a tenant's images.register refuse them with INVALID_ARGUMENT and store nothing, and a name
 * that resolves to one of them is not delivered to.
 */
import { type AddressKind, classifyHost, type HostKind } from '@better-compute/core';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { betterCompute, type ComputeInstance } from '../src/index.js';
import { deliveryAddress } from '../src/modules/webhooks/address-check.js';
import { webhookRuntime } from '../src/modules/webhooks/settings.js';
import { call, TestBridge } from './support.js';

/** [host as given, verdict, where the rule comes from]. */
type Row = [string, HostKind, string];

const IPV4: Row[] = [
  ['8.8.8.8', 'public', 'a global unicast address'],
  ['172.32.0.1', 'public', 'just above RFC 1918 172.16/12'],
  ['100.128.0.1', 'public', 'just above RFC 6598 100.64/10'],
  ['198.20.0.1', 'public', 'just above RFC 2544 198.18/15'],
  ['0.0.0.0', 'unspecified', 'RFC 1122 3.2.1.3 "this host"'],
  ['0.1.2.3', 'unspecified', 'RFC 1122 3.2.1.3 0/8 "this network"'],
  ['127.0.0.1', 'loopback', 'RFC 1122 3.2.1.3 127/8'],
  ['127.255.255.254', 'loopback', 'RFC 1122 3.2.1.3 127/8'],
  ['10.0.0.1', 'private', 'RFC 1918 10/8'],
  ['172.16.0.1', 'private', 'RFC 1918 172.16/12'],
  ['172.31.255.255', 'private', 'RFC 1918 172.16/12'],
  ['192.168.1.1', 'private', 'RFC 1918 192.168/16'],
  ['100.64.0.1', 'cgnat', 'RFC 6598 100.64/10'],
  ['100.127.255.255', 'cgnat', 'RFC 6598 100.64/10'],
  ['169.254.1.1', 'link-local', 'RFC 3927 169.254/16'],
  ['169.254.169.254', 'metadata', 'cloud instance metadata (AWS, GCP, Azure, OpenStack)'],
  ['100.100.100.200', 'metadata', 'Alibaba Cloud instance metadata'],
  ['224.0.0.1', 'multicast', 'RFC 5771 224/4'],
  ['239.255.255.250', 'multicast', 'RFC 5771 224/4'],
  ['255.255.255.255', 'broadcast', 'RFC 919 7, RFC 8190 limited broadcast'],
  ['240.0.0.1', 'reserved', 'RFC 1112 4 class E'],
  ['192.0.0.1', 'reserved', 'RFC 6890 2.2.2 IETF protocol assignments'],
  ['192.0.2.1', 'reserved', 'RFC 5737 TEST-NET-1'],
  ['198.51.100.1', 'reserved', 'RFC 5737 TEST-NET-2'],
  ['203.0.113.1', 'reserved', 'RFC 5737 TEST-NET-3'],
  ['198.18.0.1', 'reserved', 'RFC 2544 benchmarking 198.18/15'],
  ['198.19.255.255', 'reserved', 'RFC 2544 benchmarking 198.18/15'],
  ['192.88.99.1', 'reserved', 'RFC 7526 former 6to4 relay anycast'],
  // inet_aton(3) and the WHATWG URL IPv4 parser: 1 to 4 parts, each decimal, 0x hex or 0 octal.
  ['2130706433', 'loopback', 'inet_aton one part: 127.0.0.1 in decimal'],
  ['0x7f000001', 'loopback', 'inet_aton one part in hex'],
  ['017700000001', 'loopback', 'inet_aton one part in octal'],
  ['0x7f.1', 'loopback', 'inet_aton a.b: 127.0.0.1'],
  ['127.1', 'loopback', 'inet_aton a.b: 127.0.0.1'],
  ['10.1', 'private', 'inet_aton a.b: 10.0.0.1'],
  ['10.0.1', 'private', 'inet_aton a.b.c: 10.0.0.1'],
  ['0xa.0.0.1', 'private', 'inet_aton hex part: 10.0.0.1'],
  ['012.0.0.1', 'private', 'inet_aton octal part: 10.0.0.1'],
  ['0300.0250.0.1', 'private', 'inet_aton octal parts: 192.168.0.1'],
  ['0xA9FEA9FE', 'metadata', 'inet_aton hex: 169.254.169.254'],
  ['0251.0376.0251.0376', 'metadata', 'inet_aton octal: 169.254.169.254'],
  ['127.0.0.1.', 'loopback', 'a trailing dot (RFC 1034 3.1 absolute name)'],
  ['127.0.0.1..', 'loopback', 'trailing dots: a URL takes it for a name, a resolver for the address'],
];

const IPV6: Row[] = [
  ['2606:4700:4700::1111', 'public', 'RFC 4291 2.4 global unicast 2000::/3'],
  ['[2a00:1450:4001::1]', 'public', 'global unicast, in brackets as a URL has it'],
  ['::', 'unspecified', 'RFC 4291 2.5.2'],
  ['::1', 'loopback', 'RFC 4291 2.5.3'],
  ['[::1]', 'loopback', 'RFC 4291 2.5.3 in brackets'],
  ['0:0:0:0:0:0:0:1', 'loopback', 'RFC 4291 2.5.3 uncompressed'],
  ['fe80::1', 'link-local', 'RFC 4291 2.5.6 fe80::/10'],
  ['febf::1', 'link-local', 'RFC 4291 2.5.6 fe80::/10, its top'],
  ['fc00::1', 'private', 'RFC 4193 fc00::/7'],
  ['fd12:3456::1', 'private', 'RFC 4193 fc00::/7'],
  ['fec0::1', 'private', 'RFC 3879 site-local fec0::/10'],
  ['ff02::1', 'multicast', 'RFC 4291 2.7 ff00::/8'],
  ['FF05::2', 'multicast', 'RFC 4291 2.7, upper case (RFC 5952 4.3 reads either)'],
  ['fd00:ec2::254', 'metadata', 'AWS instance metadata over IPv6'],
  ['2001:db8::1', 'reserved', 'RFC 3849 documentation'],
  ['3fff::1', 'reserved', 'RFC 9637 documentation'],
  ['100::1', 'reserved', 'RFC 6666 discard-only 100::/64'],
  ['2001:2::1', 'reserved', 'RFC 5180 benchmarking 2001:2::/48'],
  ['5f00::1', 'reserved', 'RFC 9602 SRv6 SIDs'],
  ['4000::1', 'reserved', 'RFC 4291 2.4: outside 2000::/3 is reserved by the IETF'],
  ['::2', 'reserved', 'RFC 4291 2.4 ::/8 reserved by the IETF'],
  // IPv4-mapped, RFC 4291 2.5.5.2: ::ffff:a.b.c.d, routed to the IPv4 address.
  ['::ffff:10.0.0.1', 'private', 'RFC 4291 2.5.5.2 mapped, dotted'],
  ['::ffff:a00:1', 'private', 'RFC 4291 2.5.5.2 mapped, hex'],
  ['0:0:0:0:0:ffff:7f00:1', 'loopback', 'RFC 4291 2.5.5.2 mapped, uncompressed'],
  ['::FFFF:7F00:1', 'loopback', 'RFC 4291 2.5.5.2 mapped, upper case'],
  ['::ffff:169.254.169.254', 'metadata', 'RFC 4291 2.5.5.2 mapped metadata'],
  ['::ffff:8.8.8.8', 'public', 'RFC 4291 2.5.5.2 mapped public address'],
  // IPv4-compatible, RFC 4291 2.5.5.1 (deprecated): ::a.b.c.d.
  ['::10.0.0.1', 'private', 'RFC 4291 2.5.5.1 compatible, dotted'],
  ['::a00:1', 'private', 'RFC 4291 2.5.5.1 compatible, hex'],
  ['::127.0.0.1', 'loopback', 'RFC 4291 2.5.5.1 compatible'],
  ['::8.8.8.8', 'reserved', 'RFC 4291 2.5.5.1 deprecated, not routed'],
  // SIIT IPv4-translated, RFC 2765 2.1 (RFC 7915): ::ffff:0:a.b.c.d.
  ['::ffff:0:a00:1', 'private', 'RFC 2765 2.1 IPv4-translated, hex (issue 39)'],
  ['::ffff:0:10.0.0.1', 'private', 'RFC 2765 2.1 IPv4-translated, dotted'],
  ['::ffff:0:7f00:1', 'loopback', 'RFC 2765 2.1 IPv4-translated'],
  ['::ffff:0:8.8.8.8', 'reserved', 'RFC 2765 2.1: not a routed form'],
  // NAT64 well-known prefix, RFC 6052 2.1: 64:ff9b::/96, never for non-global IPv4 (3.1).
  ['64:ff9b::10.0.0.1', 'private', 'RFC 6052 2.1 well-known prefix, dotted'],
  ['64:ff9b::a00:1', 'private', 'RFC 6052 2.1 well-known prefix, hex'],
  ['64:ff9b::a9fe:a9fe', 'metadata', 'RFC 6052 2.1 well-known prefix'],
  ['64:ff9b::8.8.8.8', 'public', 'RFC 6052 2.1: translated to a public address'],
  // NAT64 local-use prefix, RFC 8215: 64:ff9b:1::/48, any RFC 6052 2.2 length from /48 to /96.
  ['64:ff9b:1::a00:1', 'private', 'RFC 8215 local-use, /96 position (issue 39)'],
  ['64:ff9b:1::10.0.0.1', 'private', 'RFC 8215 local-use, /96, dotted'],
  ['64:ff9b:1:0:a:0:100::', 'private', 'RFC 8215 local-use, RFC 6052 /64 position (bits 72-103)'],
  ['64:ff9b:1:a00:1::', 'private', 'RFC 8215 local-use, RFC 6052 /48 position (bits 48-63, 72-87)'],
  ['64:ff9b:1::8.8.8.8', 'reserved', 'RFC 8215: local-use is not globally reachable'],
  // 6to4, RFC 3056 2: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
  ['2002:a00:1::', 'private', 'RFC 3056 2 6to4 of 10.0.0.1'],
  ['2002:7f00:1::1', 'loopback', 'RFC 3056 2 6to4 of 127.0.0.1'],
  ['2002:a9fe:a9fe::', 'metadata', 'RFC 3056 2 6to4 of 169.254.169.254'],
  ['2002:808:808::1', 'public', 'RFC 3056 2 6to4 of 8.8.8.8'],
  // Teredo, RFC 4380 4: 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client inverted.
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved', "RFC 4380 4's example: client 192.0.2.45"],
  ['2001:0:4136:e378:8000:63bf:f5ff:fffe', 'private', 'RFC 4380 4 client 10.0.0.1 (inverted)'],
  ['2001:0:4136:e378::80ff:fffe', 'loopback', 'RFC 4380 4 client 127.0.0.1 (inverted)'],
  ['2001:0:a00:1::f7f7:f7f7', 'private', 'RFC 4380 4 server 10.0.0.1, client 8.8.8.8'],
  // Zone ids, RFC 4007 11 (and RFC 6874 %25 in a URI): an address scoped to one link.
  ['fe80::1%eth0', 'link-local', 'RFC 4007 11 zone id, as a resolver answers it'],
  ['[fe80::1%25eth0]', 'link-local', 'RFC 6874 2 zone id in a URI'],
  ['2606:4700::1%eth0', 'link-local', 'RFC 4007: a zone id scopes even a global address to a link'],
  // Text that is no IPv6 address (RFC 4291 2.2) is refused, never taken for a name.
  ['1::2::3', 'reserved', 'RFC 4291 2.2: "::" at most once'],
  ['::ffff:010.0.0.1', 'reserved', 'RFC 4291 2.2: the dotted part is plain decimal'],
  ['12345::', 'reserved', 'RFC 4291 2.2: at most four hex digits'],
  ['[::g]', 'reserved', 'RFC 4291 2.2: hex digits only'],
];

const NAMES: Row[] = [
  ['hooks.example.com', 'name', 'a DNS name: checked again once resolved'],
  ['hooks.example.com.', 'name', 'an absolute name (RFC 1034 3.1)'],
  ['localhost.example.com', 'name', 'a name that only starts with localhost'],
  ['notlocalhost', 'name', 'a name that only ends with localhost'],
  ['localhost', 'loopback', 'RFC 6761 6.3'],
  ['LOCALHOST', 'loopback', 'RFC 6761 6.3, names are case-insensitive (RFC 4343)'],
  ['localhost.', 'loopback', 'RFC 6761 6.3 with a trailing dot (issue 39)'],
  ['localhost...', 'loopback', 'RFC 6761 6.3 with trailing dots'],
  ['x.localhost', 'loopback', 'RFC 6761 6.3: names under localhost'],
  ['x.localhost.', 'loopback', 'RFC 6761 6.3 under localhost, trailing dot (issue 39)'],
  ['A.B.LocalHost..', 'loopback', 'RFC 6761 6.3, case and dots'],
  ['metadata.google.internal.', 'metadata', "Google Cloud's metadata server by name"],
  ['.', 'reserved', 'nothing left once the dots go'],
  ['', 'reserved', 'no host'],
];

/** URLs as tenants give them: the URL parser's spelling first, then the check. */
const URLS: [string, HostKind][] = [
  ['https://[64:ff9b:1::a00:1]/x', 'private'],
  ['https://[::ffff:0:a00:1]/x', 'private'],
  ['https://localhost./x', 'loopback'],
  ['https://x.localhost./x', 'loopback'],
  ['https://LOCALHOST.../x', 'loopback'],
  ['https://%6c%6fcalhost./x', 'loopback'],
  ['https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54./x', 'loopback'], // full-width, IDNA-mapped
  ['https://127.0.0.1../x', 'loopback'],
  ['https://0x7f.1/x', 'loopback'],
  ['https://2130706433/x', 'loopback'],
  ['https://[::ffff:10.0.0.1]/x', 'private'],
  ['https://[::10.0.0.1]/x', 'private'],
  ['https://[2002:a00:1::]/x', 'private'],
  ['https://hooks.example.com./x', 'name'],
];

describe('classifyHost, from the RFCs', () => {
  it.each([...IPV4, ...IPV6, ...NAMES])('%s is %s (%s)', (host, kind) => {
    expect(classifyHost(host).kind).toBe(kind);
  });

  it.each(URLS)('%s is %s once the URL parser has read it', (url, kind) => {
    expect(classifyHost(new URL(url).hostname).kind).toBe(kind);
  });

  it('names the IPv4 address a form carries, and the host as matched', () => {
    expect(classifyHost('[64:ff9b:1::a00:1]')).toEqual({
      host: '64:ff9b:1::a00:1',
      kind: 'private',
      family: 6,
      carries: '10.0.0.1',
    });
    expect(classifyHost('0x7f.1')).toEqual({ host: '127.0.0.1', kind: 'loopback', family: 4, carries: null });
    expect(classifyHost('X.LocalHost..')).toEqual({
      host: 'x.localhost',
      kind: 'loopback',
      family: null,
      carries: null,
    });
  });
});

describe('the check at resolution time', () => {
  const runtime = (answer: string) => ({
    ...webhookRuntime({ allowLoopback: false }),
    lookup: async () => [{ address: answer, family: (answer.includes(':') ? 6 : 4) as 4 | 6 }],
  });

  it.each([
    ['64:ff9b:1::a00:1', /resolves to 64:ff9b:1::a00:1 \(carrying 10\.0\.0\.1\), a private address/],
    ['::ffff:0:a00:1', /resolves to ::ffff:0:a00:1 \(carrying 10\.0\.0\.1\), a private address/],
    ['2001:0:4136:e378::80ff:fffe', /carrying 127\.0\.0\.1\), a loopback address/],
    ['fe80::1%eth0', /resolves to fe80::1, a link-local address/],
    ['::ffff:169.254.169.254', /a cloud metadata address/],
  ])('a name that resolves to %s is not delivered to', async (answer, message) => {
    await expect(deliveryAddress(new URL('https://rebind.evil.test/'), runtime(answer))).rejects.toThrow(
      message,
    );
  });

  it('a name that resolves to a public address is connected to at that address', async () => {
    expect(
      await deliveryAddress(new URL('https://hooks.example.com./x'), runtime('2606:4700::1111')),
    ).toEqual({
      address: '2606:4700::1111',
      family: 6,
    });
  });

  it('an address literal in any spelling is connected to as checked, without a lookup', async () => {
    const noLookup = {
      ...webhookRuntime({}),
      lookup: async () => {
        throw new Error('looked up');
      },
    };
    expect(await deliveryAddress(new URL('https://[2002:808:808::1]/'), noLookup)).toEqual({
      address: '2002:808:808::1',
      family: 6,
    });
    await expect(deliveryAddress(new URL('https://[::ffff:0:a00:1]/'), noLookup)).rejects.toThrow(
      /carrying 10\.0\.0\.1/,
    );
    await expect(
      deliveryAddress(new URL('https://localhost./'), { ...noLookup, allowLoopback: false }),
    ).rejects.toThrow(/localhost is a loopback address/);
  });
});

describe('through the handler: webhooks.create and a tenant’s images.register', () => {
  const ACME = 't-acme-admin';
  const ROOT = 't-root-admin';
  const REFUSED = [
    'https://[64:ff9b:1::a00:1]/x',
    'https://[::ffff:0:a00:1]/x',
    'https://localhost./x',
    'https://x.localhost./x',
  ];
  let database: TestDatabase;
  let compute: ComputeInstance;

  beforeAll(async () => {
    database = await createTestDatabase('pglite', 4);
    compute = await betterCompute(
      {
        database,
        iam: new TestBridge(),
        rateLimit: false,
        secret: 'a deployment secret for the outbound address tests',
        // A shared deployment's setting: loopback is refused too (docs/webhooks.md).
        webhooks: { allowLoopback: false },
      },
      { log: () => {} },
    );
    await compute.migrate();
  }, 120_000);

  afterAll(async () => {
    await compute?.close();
    await database?.close();
  });

  const image = (source: string, name: string) => ({
    name,
    source,
    diskFormat: 'raw',
    sha256: 'a'.repeat(64),
    sizeBytes: 1,
    os: 'debian-12',
    channel: 'stable',
  });

  it.each(REFUSED)('webhooks.create refuses %s with INVALID_ARGUMENT', async (url) => {
    const { status, body } = await call(
      compute,
      'webhooks.create',
      { url, events: ['site.*'] },
      { token: ACME },
    );
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'url' } });
    expect(body.error!.message).toMatch(/url points at a (private|loopback) address/);
  });

  it.each(REFUSED)('images.register refuses a tenant’s %s with INVALID_ARGUMENT', async (source) => {
    const { status, body } = await call(compute, 'images.register', image(source, 'refused'), {
      token: ACME,
    });
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { field: 'source' } });
    expect(body.error!.message).toMatch(/is a (private|loopback) address, not a public address/);
    const kernel = { source, sha256: 'b'.repeat(64), sizeBytes: 1 };
    const viaKernel = await call(
      compute,
      'images.register',
      { ...image('https://images.example.com/d.raw', 'refused-kernel'), boot: { kernel, initrd: null } },
      { token: ACME },
    );
    expect(viaKernel.body.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      details: { field: 'boot.kernel.source' },
    });
  });

  it('stored nothing it refused, and takes a public name and the platform’s own sources', async () => {
    const webhook = await call(
      compute,
      'webhooks.create',
      { url: 'https://hooks.example.com./x', events: ['site.*'] },
      { token: ACME },
    );
    expect(webhook.status).toBe(200);
    const hooks = await call(compute, 'webhooks.list', {}, { token: ACME });
    expect((hooks.body.data as { items: { url: string }[] }).items.map((w) => w.url)).toEqual([
      'https://hooks.example.com./x',
    ]);
    const mine = await call(compute, 'images.register', image('https://images.example.com/d.raw', 'mine'), {
      token: ACME,
    });
    expect(mine.status).toBe(200);
    const images = await call(compute, 'images.list', {}, { token: ACME });
    expect((images.body.data as { items: { name: string }[] }).items.map((i) => i.name)).toEqual(['mine']);
    // The platform's images may name the operator's own hosts; the rule is for tenants.
    const platform = await call(compute, 'images.register', image('https://localhost./d.raw', 'platform'), {
      token: ROOT,
    });
    expect(platform.status).toBe(200);
  });
});

// The verdicts the table uses are every kind there is: a new kind gets a row.
const KINDS: Record<AddressKind, true> = {
  public: true,
  loopback: true,
  private: true,
  'link-local': true,
  cgnat: true,
  multicast: true,
  broadcast: true,
  unspecified: true,
  reserved: true,
  metadata: true,
};
it('the table has a row for every kind', () => {
  const seen = new Set([...IPV4, ...IPV6, ...NAMES].map(([, kind]) => kind));
  expect([...Object.keys(KINDS), 'name'].filter((kind) => !seen.has(kind as HostKind))).toEqual([]);
});
