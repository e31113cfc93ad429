/**
 * A Redfish BMC the suites serve themselves: the few resources the Redfish driver uses, over
 * node:https with a certificate of the test's making (or plain http on loopback).
 *
 *   GET    /redfish/v1/                                   the service root
 *   POST   /redfish/v1/SessionService/Sessions            sign in: X-Auth-Token and Location
 *   DELETE /redfish/v1/SessionService/Sessions/<id>       sign out
 *   GET    /redfish/v1/Systems                            one member, /redfish/v1/Systems/<id>
 *   GET    /redfish/v1/Systems/<id>                       PowerState, Boot, the Reset action (with an ETag)
 *   PATCH  /redfish/v1/Systems/<id>                       Boot.BootSourceOverrideTarget/Enabled (If-Match checked)
 *   POST   /redfish/v1/Systems/<id>/Actions/ComputerSystem.Reset   ResetType
 *
 * What the system does is its backend's: a state object (`stateBackend`), or a real BMC through a
 * driver (`driverBackend`: the Redfish calls become IPMI calls to ipmi_sim, whose chassis starts
 * and stops a real QEMU machine). Every request is recorded, so a test can tell that none arrived.
 */
import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  createCaCertificate,
  issueCertificate,
  newP256Key,
} from '../../../better-compute/src/pki/certificates.js';
import type { BmcDriver } from '../../src/metal/index.js';

/** A server certificate for 127.0.0.1, its key, the CA that signed it and its SHA-256 fingerprint. */
export interface Issued {
  caPem: string;
  key: string;
  cert: string;
  fingerprint: string;
}

/** A CA of the test's own (ECDSA P-256, one day). */
export async function certificateAuthority(): Promise<{ pem: string; key: KeyObject }> {
  const key = newP256Key();
  const now = Date.now();
  const ca = await createCaCertificate({
    key,
    trustDomain: 'bmc.test',
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 86_400_000),
  });
  return { pem: ca.pem, key };
}

/** A BMC's certificate for 127.0.0.1, signed by `ca`. */
export async function serverCertificate(ca: { pem: string; key: KeyObject }): Promise<Issued> {
  const key = newP256Key();
  const now = Date.now();
  const leaf = await issueCertificate({
    caCertificatePem: ca.pem,
    caKey: ca.key,
    subjectKey: key,
    commonName: 'bmc',
    hosts: ['127.0.0.1'],
    usages: ['server'],
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3_600_000),
  });
  const der = Buffer.from(leaf.pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const fingerprint = createHash('sha256').update(der).digest('hex').toUpperCase().match(/../g)!.join(':');
  return {
    caPem: ca.pem,
    key: key.export({ type: 'pkcs8', format: 'pem' }) as string,
    cert: leaf.pem,
    fingerprint,
  };
}

export interface RedfishBackend {
  powerState(): Promise<'On' | 'Off'>;
  reset(type: string): Promise<void>;
  setBoot(target: string, enabled: string): Promise<void>;
  boot(): { target: string; enabled: string };
}

/** A system that is only a state object. */
export function stateBackend(): RedfishBackend & { power: 'On' | 'Off'; resets: string[] } {
  const boot = { target: 'None', enabled: 'Disabled' };
  const backend = {
    power: 'Off' as 'On' | 'Off',
    resets: [] as string[],
    powerState: async () => backend.power,
    reset: async (type: string) => {
      backend.resets.push(type);
      if (type === 'On' || type === 'ForceRestart' || type === 'PowerCycle') backend.power = 'On';
      if (type === 'ForceOff' || type === 'GracefulShutdown') backend.power = 'Off';
    },
    setBoot: async (target: string, enabled: string) => {
      boot.target = target;
      boot.enabled = enabled;
    },
    boot: () => ({ ...boot }),
  };
  return backend;
}

/** A system whose power and boot device are a real BMC's, through a driver (IPMI to ipmi_sim). */
export function driverBackend(driver: BmcDriver): RedfishBackend {
  const boot = { target: 'None', enabled: 'Disabled' };
  const resets: Record<string, 'on' | 'off' | 'reset' | 'cycle' | 'soft'> = {
    On: 'on',
    ForceOff: 'off',
    ForceRestart: 'reset',
    PowerCycle: 'cycle',
    GracefulShutdown: 'soft',
  };
  return {
    powerState: async () => ((await driver.power('status')) === 'on' ? 'On' : 'Off'),
    reset: async (type) => driver.power(resets[type]!),
    setBoot: async (target, enabled) => {
      await driver.setBootDevice(target === 'Pxe' ? 'pxe' : 'disk', { persistent: enabled === 'Continuous' });
      boot.target = target;
      boot.enabled = enabled;
    },
    boot: () => ({ ...boot }),
  };
}

export interface EmulatorOptions {
  username: string;
  password: string;
  backend: RedfishBackend;
  /** Key and certificate (PEM) for https; plain http on loopback without them. */
  tls?: { key: string; cert: string };
  resetTypes?: string[];
  bootTargets?: string[];
  /** Accept connections and never answer (a BMC that hangs). */
  silent?: boolean;
}

export interface RedfishEmulator {
  url: string;
  requests: { method: string; path: string; auth: 'token' | 'basic' | 'none' }[];
  sessions: () => number;
  close(): Promise<void>;
}

const SYSTEM = '/redfish/v1/Systems/lab';

export async function startRedfishEmulator(options: EmulatorOptions): Promise<RedfishEmulator> {
  const sessions = new Map<string, string>();
  const requests: RedfishEmulator['requests'] = [];
  const resetTypes = options.resetTypes ?? [
    'On',
    'ForceOff',
    'ForceRestart',
    'PowerCycle',
    'GracefulShutdown',
  ];
  const bootTargets = options.bootTargets ?? ['None', 'Pxe', 'Hdd'];
  let etagCounter = 1;

  const send = (
    res: ServerResponse,
    status: number,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, { ...(text ? { 'content-type': 'application/json' } : {}), ...headers });
    res.end(text);
  };
  const error = (res: ServerResponse, status: number, messageId: string, message: string) =>
    send(res, status, {
      error: {
        code: messageId,
        message,
        '@Message.ExtendedInfo': [{ MessageId: messageId, Message: message }],
      },
    });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const path = (req.url ?? '/').split('?')[0]!;
    const token = req.headers['x-auth-token'];
    const basic = req.headers.authorization;
    requests.push({
      method: req.method ?? '',
      path,
      auth: typeof token === 'string' ? 'token' : typeof basic === 'string' ? 'basic' : 'none',
    });
    let body: Record<string, unknown> = {};
    try {
      body = chunks.length
        ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>)
        : {};
    } catch {
      return error(res, 400, 'Base.1.8.MalformedJSON', 'The request body is not JSON.');
    }
    if (path === '/redfish/v1/' || path === '/redfish/v1')
      return send(res, 200, {
        '@odata.id': '/redfish/v1/',
        Id: 'RootService',
        RedfishVersion: '1.11.0',
        Systems: { '@odata.id': '/redfish/v1/Systems' },
        SessionService: { '@odata.id': '/redfish/v1/SessionService' },
        Links: { Sessions: { '@odata.id': '/redfish/v1/SessionService/Sessions' } },
      });
    if (path === '/redfish/v1/SessionService/Sessions' && req.method === 'POST') {
      if (body.UserName !== options.username || body.Password !== options.password)
        return error(res, 401, 'Base.1.8.NoValidSession', 'Invalid username or password.');
      const id = randomBytes(4).toString('hex');
      const secret = randomBytes(16).toString('hex');
      sessions.set(secret, id);
      return send(
        res,
        201,
        { '@odata.id': `/redfish/v1/SessionService/Sessions/${id}`, Id: id, UserName: body.UserName },
        {
          'x-auth-token': secret,
          location: `/redfish/v1/SessionService/Sessions/${id}`,
        },
      );
    }
    const byToken = typeof token === 'string' && sessions.has(token);
    const byBasic =
      typeof basic === 'string' &&
      basic === `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`;
    if (!byToken && !byBasic) return error(res, 401, 'Base.1.8.NoValidSession', 'No valid session.');
    if (path.startsWith('/redfish/v1/SessionService/Sessions/') && req.method === 'DELETE') {
      for (const [secret, id] of sessions) if (path.endsWith(`/${id}`)) sessions.delete(secret);
      return send(res, 204);
    }
    if (path === '/redfish/v1/Systems' && req.method === 'GET')
      return send(res, 200, { Members: [{ '@odata.id': SYSTEM }], 'Members@odata.count': 1 });
    if (path === SYSTEM && req.method === 'GET') {
      const boot = options.backend.boot();
      return send(
        res,
        200,
        {
          '@odata.id': SYSTEM,
          Id: 'lab',
          PowerState: await options.backend.powerState(),
          Boot: {
            BootSourceOverrideTarget: boot.target,
            BootSourceOverrideEnabled: boot.enabled,
            'BootSourceOverrideTarget@Redfish.AllowableValues': bootTargets,
          },
          Actions: {
            '#ComputerSystem.Reset': {
              target: `${SYSTEM}/Actions/ComputerSystem.Reset`,
              'ResetType@Redfish.AllowableValues': resetTypes,
            },
          },
        },
        { etag: `W/"${etagCounter}"` },
      );
    }
    if (path === SYSTEM && req.method === 'PATCH') {
      const match = req.headers['if-match'];
      if (match !== undefined && match !== `W/"${etagCounter}"`)
        return error(res, 412, 'Base.1.8.PreconditionFailed', 'The ETag does not match.');
      const boot = (body.Boot ?? {}) as Record<string, unknown>;
      const target = String(boot.BootSourceOverrideTarget ?? '');
      if (!bootTargets.includes(target))
        return error(res, 400, 'Base.1.8.PropertyValueNotInList', `${target} is not an allowed boot target.`);
      await options.backend.setBoot(target, String(boot.BootSourceOverrideEnabled ?? 'Once'));
      etagCounter += 1;
      return send(res, 204);
    }
    if (path === `${SYSTEM}/Actions/ComputerSystem.Reset` && req.method === 'POST') {
      const type = String(body.ResetType ?? '');
      if (!resetTypes.includes(type))
        return error(
          res,
          400,
          'Base.1.8.ActionParameterNotSupported',
          `The reset type ${type} is not supported.`,
        );
      try {
        await options.backend.reset(type);
      } catch (cause) {
        return error(res, 500, 'Base.1.8.InternalError', (cause as Error).message);
      }
      return send(res, 204);
    }
    return error(res, 404, 'Base.1.8.ResourceMissingAtURI', `${path} is not here.`);
  };

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (options.silent) return; // Never answers.
    handle(req, res).catch((cause) => error(res, 500, 'Base.1.8.InternalError', String(cause)));
  };
  const server = options.tls
    ? createHttpsServer({ key: options.tls.key, cert: options.tls.cert }, listener)
    : createHttpServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    requests,
    sessions: () => sessions.size,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
