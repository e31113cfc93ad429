/**
 * The machine side of bare metal without a machine: the Redfish driver against a Redfish BMC the
 * suite serves (https with a certificate of its own CA, a state object behind it), what every
 * driver refuses before it sends anything, kernel command lines, the iPXE scripts and the DHCP
 * requests read from dnsmasq's packet dump. The real machine (QEMU, ipmi_sim, dnsmasq) is
 * in metal-lab.test.ts.
 */
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BmcError,
  checkCmdline,
  createIpmiDriver,
  createRedfishDriver,
  dhcpRequestsOf,
  planSubnet,
  uuidOfOption97,
  type BmcFailure,
} from '../src/metal/index.js';
import { bootScript, discoveryScript, entryScript } from '../src/metal/boot-entries.js';
import { pcapHeader, PcapReader } from '../src/metal/dhcp-capture.js';
import {
  certificateAuthority,
  serverCertificate,
  startRedfishEmulator,
  stateBackend,
  type Issued,
  type RedfishEmulator,
} from './metal/redfish-emulator.js';

const USER = 'operator';
const PASSWORD = 'Sup3r-s3cret-BMC-pw';

/** Runs `work`, which must fail with a BmcError of `failure`; returns it. */
async function failure(work: () => unknown, expected: BmcFailure): Promise<BmcError> {
  try {
    await work();
  } catch (error) {
    expect(error).toBeInstanceOf(BmcError);
    expect({ failure: (error as BmcError).failure, message: (error as BmcError).message }).toMatchObject({
      failure: expected,
    });
    expect((error as BmcError).message).not.toContain(PASSWORD);
    expect(JSON.stringify(error)).not.toContain(PASSWORD);
    expect((error as BmcError).hint).toBeTruthy();
    return error as BmcError;
  }
  throw new Error(`expected a ${expected} failure, and the call succeeded`);
}

describe('the Redfish driver, against a Redfish BMC served over https', () => {
  let issued: Issued;
  let stranger: Issued;
  let backend: ReturnType<typeof stateBackend>;
  let bmc: RedfishEmulator;

  beforeAll(async () => {
    issued = await serverCertificate(await certificateAuthority());
    stranger = await serverCertificate(await certificateAuthority());
    backend = stateBackend();
    bmc = await startRedfishEmulator({ username: USER, password: PASSWORD, backend, tls: issued });
  });
  afterAll(() => bmc?.close());

  const driver = (overrides: Partial<Parameters<typeof createRedfishDriver>[0]> = {}) =>
    createRedfishDriver({
      url: bmc.url,
      credentials: { username: USER, password: PASSWORD },
      trust: { fingerprint256: issued.fingerprint },
      timeoutMs: 5000,
      ...overrides,
    });

  it('reads and changes the power through ComputerSystem.Reset, signing out of each session', async () => {
    const redfish = driver();
    expect(await redfish.power('status')).toBe('off');
    await redfish.power('on');
    expect(await redfish.power('status')).toBe('on');
    await redfish.power('reset');
    await redfish.power('soft');
    expect(await redfish.power('status')).toBe('off');
    expect(backend.resets.slice(-3)).toEqual(['On', 'ForceRestart', 'GracefulShutdown']);
    expect(bmc.sessions()).toBe(0);
    expect(bmc.requests.every((r) => r.auth === 'token' || r.path.endsWith('/Sessions'))).toBe(true);
  });

  it('sets the next boot device, once or for every boot, by PATCH of BootSourceOverrideTarget', async () => {
    const redfish = driver();
    await redfish.setBootDevice('pxe', { persistent: true });
    expect(backend.boot()).toEqual({ target: 'Pxe', enabled: 'Continuous' });
    await redfish.setBootDevice('disk');
    expect(backend.boot()).toEqual({ target: 'Hdd', enabled: 'Once' });
  });

  it('trusts a BMC certificate through its pinned CA, and speaks HTTP Basic when asked', async () => {
    const before = bmc.requests.length;
    const redfish = driver({ trust: { ca: issued.caPem }, auth: 'basic' });
    await redfish.power('off');
    expect(await redfish.power('status')).toBe('off');
    expect(bmc.requests.slice(before).every((r) => r.auth === 'basic')).toBe(true);
  });

  it('sends nothing to a BMC whose certificate is not the pinned one', async () => {
    const before = bmc.requests.length;
    const byFingerprint = await failure(
      () => driver({ trust: { fingerprint256: stranger.fingerprint } }).power('status'),
      'untrusted',
    );
    expect(byFingerprint.code).toBe('INVALID_STATE');
    await failure(() => driver({ trust: { ca: stranger.caPem } }).power('on'), 'untrusted');
    expect(bmc.requests.length).toBe(before);
  });

  it('says the credentials were refused, without repeating the password', async () => {
    const error = await failure(
      () => driver({ credentials: { username: USER, password: 'not-the-password' } }).power('status'),
      'auth',
    );
    expect(error.code).toBe('INVALID_STATE');
    expect(error.details).toMatchObject({ bmc: 'auth', protocol: 'redfish' });
    expect(error.message).not.toContain('not-the-password');
    await failure(
      () =>
        driver({ auth: 'basic', credentials: { username: USER, password: 'not-the-password' } }).power('on'),
      'auth',
    );
  });

  it('keeps the password out of what a driver shows of itself', () => {
    const redfish = driver();
    expect(JSON.stringify(redfish)).not.toContain(PASSWORD);
    expect(inspect(redfish, { showHidden: true, depth: 5 })).not.toContain(PASSWORD);
    const ipmi = createIpmiDriver({
      host: '127.0.0.1',
      credentials: { username: 'admin', password: 'ipmi-secret-1' },
    });
    expect(inspect(ipmi, { showHidden: true, depth: 5 })).not.toContain('ipmi-secret-1');
  });
});

describe('a Redfish BMC that offers less', () => {
  it('cycles as ForceOff then On without PowerCycle, and refuses what it does not offer', async () => {
    const backend = stateBackend();
    const bmc = await startRedfishEmulator({
      username: USER,
      password: PASSWORD,
      backend,
      resetTypes: ['On', 'ForceOff'],
      bootTargets: ['None', 'Hdd'],
    });
    try {
      const redfish = createRedfishDriver({
        url: bmc.url,
        credentials: { username: USER, password: PASSWORD },
      });
      await redfish.power('cycle'); // Off: a cycle powers it on.
      await redfish.power('cycle');
      expect(backend.resets).toEqual(['On', 'ForceOff', 'On']);
      const soft = await failure(() => redfish.power('soft'), 'unsupported');
      expect(soft.code).toBe('UNSUPPORTED');
      expect(soft.message).toContain('GracefulShutdown');
      await failure(() => redfish.setBootDevice('pxe'), 'unsupported');
    } finally {
      await bmc.close();
    }
  });

  it('ends a call to a BMC that does not answer within the bound, and says one that is not there is unreachable', async () => {
    const bmc = await startRedfishEmulator({
      username: USER,
      password: PASSWORD,
      backend: stateBackend(),
      silent: true,
    });
    try {
      const started = Date.now();
      const error = await failure(
        () =>
          createRedfishDriver({
            url: bmc.url,
            credentials: { username: USER, password: PASSWORD },
            timeoutMs: 800,
          }).power('status'),
        'timeout',
      );
      expect(Date.now() - started).toBeLessThan(3000);
      expect(error.code).toBe('UNAVAILABLE');
    } finally {
      await bmc.close();
    }
    const closed = await failure(
      () =>
        createRedfishDriver({ url: bmc.url, credentials: { username: USER, password: PASSWORD } }).power(
          'status',
        ),
      'unreachable',
    );
    expect(closed.code).toBe('UNAVAILABLE');
  });
});

describe('what a driver refuses before it sends anything', () => {
  const credentials = { username: 'admin', password: 'pw-secret' };
  it.each([
    ['plain http off loopback', { url: 'http://10.0.0.5', credentials }],
    ['https without a pin', { url: 'https://10.0.0.5', credentials }],
    ['a URL with a user part', { url: 'https://admin:pw@10.0.0.5', credentials }],
    ['a URL with a path', { url: 'https://10.0.0.5/redfish/v1', credentials }],
    ['a malformed fingerprint', { url: 'https://10.0.0.5', credentials, trust: { fingerprint256: 'AB:CD' } }],
    ['an empty password', { url: 'http://127.0.0.1:1', credentials: { username: 'admin', password: '' } }],
    [
      'a user with a space',
      { url: 'http://127.0.0.1:1', credentials: { username: 'ad min', password: 'x' } },
    ],
    ['a system id with a slash', { url: 'http://127.0.0.1:1', credentials, systemId: '../x' }],
  ])('Redfish: %s', async (_, target) => {
    const error = await failure(
      () => createRedfishDriver(target as Parameters<typeof createRedfishDriver>[0]),
      'invalid',
    );
    expect(error.code).toBe('INVALID_ARGUMENT');
  });

  it.each([
    [
      "a password over IPMI's 20 bytes",
      { host: '10.0.0.5', credentials: { username: 'admin', password: 'x'.repeat(21) } },
    ],
    [
      'a password with a line break',
      { host: '10.0.0.5', credentials: { username: 'admin', password: 'a\nb' } },
    ],
    ['a host that reads as an option', { host: '-oProxyCommand=x', credentials }],
    ['a host with a space', { host: 'bmc 1', credentials }],
    ['a port out of range', { host: '10.0.0.5', port: 70000, credentials }],
  ])('IPMI: %s', async (_, target) => {
    const error = await failure(
      () => createIpmiDriver(target as Parameters<typeof createIpmiDriver>[0]),
      'invalid',
    );
    expect(error.message).not.toContain('x'.repeat(21));
  });

  it('IPMI: an unknown power action or boot device', async () => {
    const ipmi = createIpmiDriver({ host: '127.0.0.1', port: 9, credentials });
    await failure(() => ipmi.power('explode' as 'on'), 'invalid');
    await failure(() => ipmi.setBootDevice('floppy' as 'pxe'), 'invalid');
  });
});

describe('kernel command lines and the iPXE scripts', () => {
  it('takes an ordinary command line', () => {
    expect(checkCmdline('console=ttyS0,115200  root=/dev/sda1 ro quiet')).toBe(
      'console=ttyS0,115200 root=/dev/sda1 ro quiet',
    );
  });

  it.each([
    ['an iPXE setting', 'console=ttyS0 x=${net0/ip}'],
    ['an iPXE operator', 'quiet || shell'],
    ['a comment mark', 'quiet #x'],
    ['a line break', 'quiet\nchain http://evil/'],
    ['a quote', 'init="/bin/sh"'],
    ['too long', 'a'.repeat(1025)],
  ])('refuses %s', (_, cmdline) => {
    expect(() => checkCmdline(cmdline)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it("writes each MAC's script, the first script and the discovery script", () => {
    expect(
      entryScript({
        kernelUrl: 'http://10.77.0.1/files/k',
        initrdUrl: 'http://10.77.0.1/files/i',
        cmdline: 'quiet',
      }),
    ).toBe(
      [
        '#!ipxe',
        'echo better-compute: booting the entry of ${mac}',
        'kernel http://10.77.0.1/files/k quiet BOOTIF=${mac}',
        'initrd http://10.77.0.1/files/i',
        'boot',
        '',
      ].join('\n'),
    );
    expect(entryScript('local-disk')).toContain('sanboot --no-describe --drive 0x80');
    expect(bootScript('http://10.77.0.1')).toContain(
      'imgfetch --name entry http://10.77.0.1/nodes/${mac:hexhyp}.ipxe || goto unknown',
    );
    expect(discoveryScript(null)).toContain('exit');
    expect(discoveryScript(null)).not.toContain('kernel');
  });

  it('plans a subnet: its first address for the service, leases from its upper half', () => {
    expect(planSubnet('10.77.0.0/24')).toEqual({
      server: '10.77.0.1',
      prefix: 24,
      first: '10.77.0.128',
      last: '10.77.0.254',
      mask: '255.255.255.0',
    });
    expect(() => planSubnet('10.77.0.1/24')).toThrow(/boundary/);
    expect(() => planSubnet('10.77.0.0/30')).toThrow(/16 to \/28/);
  });
});

/** A DHCP client packet as iPXE sends it, in a raw-IPv4 pcap record as dnsmasq dumps it. */
function dumpedRequest(options: {
  mac: string;
  xid: number;
  type: number;
  op?: number;
  uuid?: Buffer;
}): Buffer {
  const dhcp = Buffer.alloc(240);
  dhcp[0] = options.op ?? 1;
  dhcp[1] = 1;
  dhcp[2] = 6;
  dhcp.writeUInt32BE(options.xid, 4);
  Buffer.from(options.mac.replace(/:/g, ''), 'hex').copy(dhcp, 28);
  dhcp.writeUInt32BE(0x63825363, 236);
  const option = (code: number, value: Buffer) => Buffer.concat([Buffer.from([code, value.length]), value]);
  const options_ = Buffer.concat([
    option(53, Buffer.from([options.type])),
    option(60, Buffer.from('PXEClient:Arch:00000:UNDI:002001')),
    option(77, Buffer.from('iPXE')),
    option(93, Buffer.from([0, 0])),
    ...(options.uuid ? [option(97, Buffer.concat([Buffer.from([0]), options.uuid]))] : []),
    Buffer.from([255]),
  ]);
  const udp = Buffer.concat([Buffer.from([0, 68, 0, 67, 0, 0, 0, 0]), dhcp, options_]);
  const ip = Buffer.alloc(20);
  ip[0] = 0x45;
  ip[9] = 17;
  const packet = Buffer.concat([ip, udp]);
  const record = Buffer.alloc(16);
  record.writeUInt32LE(1_700_000_000, 0);
  record.writeUInt32LE(250_000, 4);
  record.writeUInt32LE(packet.length, 8);
  record.writeUInt32LE(packet.length, 12);
  return Buffer.concat([record, packet]);
}

describe("DHCP requests from dnsmasq's packet dump", () => {
  // QEMU's -uuid 12345678-9abc-def0-1122-334455667788, as iPXE sent it in option 97.
  const wire = Buffer.from('78563412bc9af0de1122334455667788', 'hex');

  it('reads the option 97 UUID in SMBIOS byte order, as dmidecode prints it', () => {
    expect(uuidOfOption97(Buffer.concat([Buffer.from([0]), wire]))).toBe(
      '12345678-9abc-def0-1122-334455667788',
    );
    expect(uuidOfOption97(wire)).toBeUndefined();
  });

  it("reads each client request with its classes, architecture and UUID, and skips the server's answers", () => {
    const pcap = Buffer.concat([
      pcapHeader(),
      dumpedRequest({ mac: '52:54:00:00:07:01', xid: 7, type: 1, uuid: wire }),
      dumpedRequest({ mac: '52:54:00:00:07:01', xid: 7, type: 2, op: 2 }),
      dumpedRequest({ mac: '52:54:00:00:07:01', xid: 7, type: 3 }),
    ]);
    expect(dhcpRequestsOf(pcap)).toEqual([
      {
        at: new Date(1_700_000_000_250),
        mac: '52:54:00:00:07:01',
        xid: 7,
        type: 'discover',
        vendorClass: 'PXEClient:Arch:00000:UNDI:002001',
        userClass: ['iPXE'],
        clientArch: 0,
        uuid: '12345678-9abc-def0-1122-334455667788',
      },
      {
        at: new Date(1_700_000_000_250),
        mac: '52:54:00:00:07:01',
        xid: 7,
        type: 'request',
        vendorClass: 'PXEClient:Arch:00000:UNDI:002001',
        userClass: ['iPXE'],
        clientArch: 0,
      },
    ]);
  });

  it('reads records split across chunks, and survives truncated and hostile options', () => {
    const one = dumpedRequest({ mac: '52:54:00:00:07:02', xid: 9, type: 1 });
    const hostile = Buffer.from(one);
    hostile[hostile.length - 30] = 200; // An option length past the packet's end.
    const pcap = Buffer.concat([pcapHeader(), one, hostile, one]);
    const reader = new PcapReader();
    const found = [];
    for (let at = 0; at < pcap.length; at += 7) found.push(...reader.push(pcap.subarray(at, at + 7)));
    expect(found.map((r) => r.mac)).toEqual(['52:54:00:00:07:02', '52:54:00:00:07:02', '52:54:00:00:07:02']);
  });
});
