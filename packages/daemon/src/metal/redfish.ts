/**
 * Redfish over HTTPS: a ComputerSystem's power through its `ComputerSystem.Reset` action and its
 * next boot through a PATCH of `Boot.BootSourceOverrideTarget`, as Ironic's redfish interfaces (and
 * the sushy library under them) do.
 *
 * The BMC's certificate is pinned, never taken from the system's store: either the CA that signed it
 * (`trust.ca`) or the SHA-256 fingerprint of the certificate itself (`trust.fingerprint256`, what a
 * self-signed BMC certificate needs). The connection is checked before any request is written, so a
 * password or session token never reaches a server that is not the pinned one. Plain http is
 * refused, but on loopback (an emulator in a test).
 *
 * Each call opens a session (POST to SessionService/Sessions, then the X-Auth-Token header), does
 * its work and deletes the session; `auth: 'basic'` sends HTTP Basic on each request instead.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import {
  BmcError,
  checkCredentials,
  scrubbed,
  type BmcCredentials,
  type BmcDriver,
  type BmcFailure,
  type BootDevice,
  type BootDeviceOptions,
  type PowerAction,
  type PowerState,
} from './bmc.js';

/** What pins the BMC's certificate: the CA that signed it (PEM), or its own SHA-256 fingerprint. */
export type RedfishTrust = { ca: string } | { fingerprint256: string };

export interface RedfishTarget {
  /** The BMC's origin: `https://host[:port]` (plain http only on loopback). */
  url: string;
  /** The ComputerSystem's id under /redfish/v1/Systems; the only one there when omitted. */
  systemId?: string;
  credentials: BmcCredentials;
  /** A session per call (the default) or HTTP Basic on each request. */
  auth?: 'session' | 'basic';
  /** Required for https. */
  trust?: RedfishTrust;
  /** The bound on one call, every request of it included (15 s by default). */
  timeoutMs?: number;
}

/** Redfish imposes no length; this bounds what is held and sent. */
const PASSWORD_BYTES = 256;
const BODY_LIMIT = 1 << 20;

/** The ResetType each power change asks for. */
const RESET_TYPES: Readonly<Record<Exclude<PowerAction, 'status'>, string>> = {
  on: 'On',
  off: 'ForceOff',
  reset: 'ForceRestart',
  cycle: 'PowerCycle',
  soft: 'GracefulShutdown',
};

const BOOT_TARGETS: Readonly<Record<BootDevice, string>> = { pxe: 'Pxe', disk: 'Hdd' };

interface Response {
  status: number;
  headers: IncomingMessage['headers'];
  body: unknown;
  text: string;
}

type Auth = { token: string; session?: string } | { basic: string };

interface ComputerSystem {
  PowerState?: string;
  Actions?: Record<string, { target?: string; 'ResetType@Redfish.AllowableValues'?: string[] } | undefined>;
  Boot?: Record<string, unknown>;
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|localhost)$/i;

/** A fingerprint as `AB:CD:…` (64 hex digits), however it was written. */
export function normalizeFingerprint(fingerprint: string): string {
  const hex = fingerprint
    .replace(/^sha256[:/]/i, '')
    .replace(/[:\s]/g, '')
    .toUpperCase();
  if (!/^[0-9A-F]{64}$/.test(hex))
    throw new BmcError('invalid', 'the pinned fingerprint is not a SHA-256 fingerprint (64 hex digits)', {
      protocol: 'redfish',
    });
  return hex.match(/../g)!.join(':');
}

export class RedfishDriver implements BmcDriver {
  readonly protocol = 'redfish' as const;
  readonly address: string;
  readonly #host: string;
  readonly #port: number;
  readonly #tls: boolean;
  readonly #trust: { ca: string } | { fingerprint256: string } | null;
  readonly #username: string;
  readonly #password: string;
  readonly #auth: 'session' | 'basic';
  readonly #systemId: string | undefined;
  readonly #timeoutMs: number;

  constructor(target: RedfishTarget) {
    const invalid = (message: string) => new BmcError('invalid', message, { protocol: 'redfish' });
    let url: URL;
    try {
      url = new URL(target.url);
    } catch {
      throw invalid('the Redfish address is not a URL; give the BMC as https://host[:port]');
    }
    if (url.username || url.password) throw invalid('the Redfish address must not carry a user or password');
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash)
      throw invalid('the Redfish address is an origin only (https://host[:port]), without a path');
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (url.protocol === 'http:') {
      if (!LOOPBACK.test(host))
        throw invalid(
          'plain http to a BMC is refused: its password would cross the network in clear; use https',
        );
    } else if (url.protocol !== 'https:') throw invalid('the Redfish address must be https://');
    this.#tls = url.protocol === 'https:';
    this.#host = host;
    this.#port = url.port ? Number(url.port) : this.#tls ? 443 : 80;
    if (this.#tls) {
      const trust = target.trust;
      if (!trust || (!('ca' in trust) && !('fingerprint256' in trust)))
        throw invalid(
          'a Redfish BMC over https needs its certificate pinned: its CA (trust.ca) or its SHA-256 fingerprint',
        );
      if ('ca' in trust) {
        if (typeof trust.ca !== 'string' || !trust.ca.includes('-----BEGIN CERTIFICATE-----'))
          throw invalid('the pinned CA is not a PEM certificate');
        this.#trust = { ca: trust.ca };
      } else this.#trust = { fingerprint256: normalizeFingerprint(trust.fingerprint256) };
    } else this.#trust = null;
    checkCredentials(target.credentials, { passwordBytes: PASSWORD_BYTES, protocol: 'redfish' });
    this.#username = target.credentials.username;
    this.#password = target.credentials.password;
    this.#auth = target.auth ?? 'session';
    if (target.systemId !== undefined && !/^[A-Za-z0-9._~-]{1,128}$/.test(target.systemId))
      throw invalid('the Redfish system id must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -');
    this.#systemId = target.systemId;
    this.#timeoutMs = target.timeoutMs ?? 15_000;
    this.address = `${url.protocol}//${url.host}`;
  }

  power(action: 'status'): Promise<PowerState>;
  power(action: Exclude<PowerAction, 'status'>): Promise<void>;
  power(action: PowerAction): Promise<PowerState | void>;
  async power(action: PowerAction): Promise<PowerState | void> {
    if (action !== 'status' && !Object.hasOwn(RESET_TYPES, action))
      throw new BmcError('invalid', `${String(action).slice(0, 20)} is not a power action`, {
        protocol: 'redfish',
      });
    return this.#withSession(async (call) => {
      const { path, system } = await this.#system(call);
      if (action === 'status') return powerStateOf(system.PowerState, (m) => this.#error('failed', m));
      const reset = system.Actions?.['#ComputerSystem.Reset'];
      if (!reset)
        throw this.#error('unsupported', 'the BMC offers no ComputerSystem.Reset action for the system');
      const allowed = reset['ResetType@Redfish.AllowableValues'];
      const target = typeof reset.target === 'string' ? reset.target : `${path}/Actions/ComputerSystem.Reset`;
      const allows = (type: string) => !Array.isArray(allowed) || allowed.includes(type);
      const wanted = RESET_TYPES[action];
      // A cycle of a machine that is off is a power on; without PowerCycle it is ForceOff then On,
      // as Ironic's reboot does it.
      const off = powerStateOf(system.PowerState, (m) => this.#error('failed', m)) === 'off';
      const steps =
        action !== 'cycle'
          ? [wanted]
          : off
            ? ['On']
            : !allows(wanted) && allows('ForceOff') && allows('On')
              ? ['ForceOff', 'On']
              : [wanted];
      for (const type of steps) {
        if (!allows(type))
          throw this.#error(
            'unsupported',
            `the BMC does not offer the reset type ${type} (it offers ${(allowed ?? []).join(', ')})`,
          );
        await call('POST', target, { ResetType: type }, [200, 202, 204], `power ${action}`);
      }
    });
  }

  async setBootDevice(device: BootDevice, options: BootDeviceOptions = {}): Promise<void> {
    if (!Object.hasOwn(BOOT_TARGETS, device))
      throw new BmcError('invalid', `${String(device).slice(0, 20)} is not a boot device (pxe or disk)`, {
        protocol: 'redfish',
      });
    await this.#withSession(async (call) => {
      const { path, system, etag } = await this.#system(call);
      const target = BOOT_TARGETS[device];
      const allowed = system.Boot?.['BootSourceOverrideTarget@Redfish.AllowableValues'];
      if (Array.isArray(allowed) && !allowed.includes(target))
        throw this.#error(
          'unsupported',
          `the BMC cannot boot the system from ${target} (it offers ${allowed.join(', ')})`,
        );
      const boot = {
        BootSourceOverrideTarget: target,
        BootSourceOverrideEnabled: options.persistent ? 'Continuous' : 'Once',
      };
      await call('PATCH', path, { Boot: boot }, [200, 202, 204], `boot device ${device}`, etag);
    });
  }

  /** The system's path, its resource and ETag. */
  async #system(call: Call): Promise<{ path: string; system: ComputerSystem; etag: string | undefined }> {
    let path: string;
    if (this.#systemId) path = `/redfish/v1/Systems/${this.#systemId}`;
    else {
      const systems = (await call('GET', '/redfish/v1/Systems', undefined, [200], 'the systems list'))
        .body as {
        Members?: { '@odata.id'?: string }[];
      };
      const members = (systems?.Members ?? [])
        .map((m) => m['@odata.id'])
        .filter((id): id is string => typeof id === 'string');
      if (members.length !== 1)
        throw this.#error(
          members.length === 0 ? 'unsupported' : 'invalid',
          members.length === 0
            ? 'the BMC lists no ComputerSystem'
            : `the BMC lists ${members.length} systems; name the one to drive (systemId)`,
        );
      path = members[0]!;
    }
    if (!path.startsWith('/redfish/v1/'))
      throw this.#error('failed', 'the BMC named a system outside /redfish/v1/');
    const answer = await call('GET', path, undefined, [200], 'the system');
    const etag = answer.headers.etag;
    return {
      path,
      system: (answer.body ?? {}) as ComputerSystem,
      etag: typeof etag === 'string' ? etag : undefined,
    };
  }

  /** Runs `work` with an authenticated caller; a session is deleted afterwards, whatever happened. */
  async #withSession<T>(work: (call: Call) => Promise<T>): Promise<T> {
    const signal = AbortSignal.timeout(this.#timeoutMs);
    let auth: Auth;
    if (this.#auth === 'basic')
      auth = { basic: Buffer.from(`${this.#username}:${this.#password}`).toString('base64') };
    else {
      const answer = await this.#send(
        'POST',
        '/redfish/v1/SessionService/Sessions',
        { UserName: this.#username, Password: this.#password },
        null,
        signal,
      );
      this.#expect(answer, [200, 201], 'signing in');
      const token = answer.headers['x-auth-token'];
      if (typeof token !== 'string' || !token)
        throw this.#error('failed', 'the BMC opened a session without a token');
      const location = answer.headers.location;
      auth = { token, ...(typeof location === 'string' ? { session: location } : {}) };
    }
    const call: Call = async (method, path, body, expected, what, etag) =>
      this.#expect(await this.#send(method, path, body, auth, signal, etag), expected, what);
    try {
      return await work(call);
    } finally {
      if ('token' in auth && auth.session) {
        const path = auth.session.startsWith('/') ? auth.session : new URL(auth.session).pathname;
        await this.#send('DELETE', path, undefined, auth, AbortSignal.timeout(3000)).catch(() => undefined);
      }
    }
  }

  #expect(answer: Response, expected: number[], what: string): Response {
    if (expected.includes(answer.status)) return answer;
    const said = this.#said(answer);
    const failure: BmcFailure =
      answer.status === 401 || answer.status === 403
        ? 'auth'
        : answer.status === 405 ||
            answer.status === 501 ||
            /NotSupported|PropertyValueNotInList|ActionNotSupported/.test(said)
          ? 'unsupported'
          : 'failed';
    const message =
      failure === 'auth'
        ? answer.status === 401
          ? `the BMC at ${this.address} refused the user or password`
          : `the BMC account may not do ${what}`
        : `the BMC answered ${what} with HTTP ${answer.status}${said ? `: ${said}` : ''}`;
    throw this.#error(failure, message);
  }

  /** The BMC's error message (Redfish's error object), scrubbed. */
  #said(answer: Response): string {
    const error = (
      answer.body as {
        error?: { message?: unknown; '@Message.ExtendedInfo'?: { MessageId?: unknown; Message?: unknown }[] };
      }
    )?.error;
    const info = error?.['@Message.ExtendedInfo']?.[0];
    const parts = [info?.MessageId, info?.Message ?? error?.message].filter(
      (part): part is string => typeof part === 'string',
    );
    return scrubbed(parts.join(' '), this.#secrets());
  }

  #secrets(): string[] {
    return [this.#password, Buffer.from(`${this.#username}:${this.#password}`).toString('base64')];
  }

  /** One HTTP exchange over a connection that is checked against the pin before anything is written. */
  #send(
    method: string,
    path: string,
    body: unknown,
    auth: Auth | null,
    signal: AbortSignal,
    etag?: string,
  ): Promise<Response> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: 'application/json', 'odata-version': '4.0' };
    if (payload) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(payload.length);
    }
    if (auth && 'token' in auth) headers['x-auth-token'] = auth.token;
    if (auth && 'basic' in auth) headers.authorization = `Basic ${auth.basic}`;
    if (etag) headers['if-match'] = etag;
    return new Promise<Response>((resolve, reject) => {
      const fail = (error: unknown) => reject(this.#networkError(error, signal));
      const req = httpRequest({
        host: this.#host,
        port: this.#port,
        method,
        path,
        headers,
        signal,
        createConnection: (_options: unknown, created: (error: Error | null, socket?: Socket) => void) => {
          this.#connect(created, signal);
          return undefined;
        },
      } as unknown as RequestOptions);
      req.on('error', fail);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > BODY_LIMIT) res.destroy(new Error('the BMC answered more than 1 MiB'));
          else chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
        });
      });
      req.end(payload);
    });
  }

  /** A connection to the BMC, handed over only once its certificate matched the pin. */
  #connect(created: (error: Error | null, socket?: Socket) => void, signal: AbortSignal): void {
    let settled = false;
    let socket: Socket;
    const abandon = () => socket.destroy();
    const settle = (error: Error | null, ready?: Socket) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', abandon);
      created(error, ready);
    };
    if (!this.#tls) {
      socket = netConnect({ host: this.#host, port: this.#port });
      signal.addEventListener('abort', abandon, { once: true });
      socket.once('connect', () => settle(null, socket));
      socket.once('error', (error) => settle(error));
      return;
    }
    const trust = this.#trust!;
    const tls = tlsConnect({
      host: this.#host,
      port: this.#port,
      ...(isIP(this.#host) ? {} : { servername: this.#host }),
      ...('ca' in trust ? { ca: trust.ca, rejectUnauthorized: true } : { rejectUnauthorized: false }),
      ALPNProtocols: ['http/1.1'],
    });
    socket = tls;
    signal.addEventListener('abort', abandon, { once: true });
    tls.once('secureConnect', () => {
      if ('fingerprint256' in trust) {
        const presented = tls.getPeerCertificate()?.fingerprint256;
        if (!presented || presented.toUpperCase() !== trust.fingerprint256) {
          tls.destroy();
          settle(
            this.#error(
              'untrusted',
              `the BMC at ${this.address} presented a certificate whose fingerprint is not the pinned one`,
            ),
          );
          return;
        }
      }
      settle(null, tls);
    });
    tls.once('error', (error: Error) => settle(error));
  }

  #networkError(error: unknown, signal: AbortSignal): BmcError {
    if (error instanceof BmcError) return error;
    const code = (error as NodeJS.ErrnoException)?.code ?? '';
    const name = (error as Error)?.name ?? '';
    if (
      signal.aborted ||
      name === 'AbortError' ||
      name === 'TimeoutError' ||
      code === 'ETIMEDOUT' ||
      code === 'ABORT_ERR'
    )
      return this.#error('timeout', `the BMC at ${this.address} did not answer within ${this.#timeoutMs} ms`);
    if (
      ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'].includes(
        code,
      )
    )
      return this.#error('unreachable', `the BMC at ${this.address} cannot be reached (${code})`);
    if (
      /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|HOSTNAME_MISMATCH)/.test(code) ||
      /certificate/i.test((error as Error)?.message ?? '')
    )
      return this.#error(
        'untrusted',
        `the BMC at ${this.address} presented a certificate the pinned CA did not sign for it (${code || 'TLS'})`,
      );
    return this.#error(
      'unreachable',
      `the connection to the BMC at ${this.address} failed: ${scrubbed((error as Error)?.message ?? String(error), this.#secrets(), 160)}`,
    );
  }

  #error(failure: BmcFailure, message: string): BmcError {
    return new BmcError(failure, message, { protocol: 'redfish', address: this.address });
  }
}

type Call = (
  method: string,
  path: string,
  body: unknown,
  expected: number[],
  what: string,
  etag?: string,
) => Promise<Response>;

/** Redfish's PowerState as on or off; a transition counts as where it goes, as Ironic reads it. */
function powerStateOf(state: unknown, fail: (message: string) => BmcError): PowerState {
  if (state === 'On' || state === 'PoweringOn') return 'on';
  if (state === 'Off' || state === 'PoweringOff') return 'off';
  throw fail(`the BMC reports the power state ${JSON.stringify(scrubbed(String(state), [], 40))}`);
}

/** A Redfish driver for one BMC's ComputerSystem. */
export function createRedfishDriver(target: RedfishTarget): RedfishDriver {
  return new RedfishDriver(target);
}
