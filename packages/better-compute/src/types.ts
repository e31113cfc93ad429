/** The shape of a running deployment, as `betterCompute(config)` returns it. */
import type { Answer, ClientInfo, IamBridge, RouteInfo } from '@better-compute/core';
import type { ApiCall } from './http/handler.js';
import type { Database, MigrateResult, MigrationStatus } from '@better-compute/db';
import type { Iam } from 'better-iam';
import type { ComputeConfig } from './config/define-config.js';
import type { GaugeFamily } from './modules/define-module.js';

export type WorkerRole = 'api' | 'controllers' | 'sinks' | 'gateway';

export interface DoctorFinding {
  /** A stable id: `database.reachable`, `schema.current`, `clock.skew`, `registry.consistent`, `iam.wired`. */
  check: string;
  severity: 'ok' | 'warning' | 'error';
  message: string;
}

export interface DoctorReport {
  ok: boolean;
  findings: DoctorFinding[];
}

export interface ComputeInstance {
  /**
   * The web-standard handler: compute's routes under `basePath`, IAM's under `/api/iam`. A host that
   * knows the client's address passes it, and public calls are then limited per address.
   */
  handler(request: Request, client?: ClientInfo): Promise<Response>;
  /**
   * Compute's routes without Request and Response objects, for hosts that read sockets directly;
   * null for a path it leaves to `handler` (IAM's).
   */
  dispatch(call: ApiCall): Promise<Answer | null>;
  /**
   * The live event stream as a web handler, for a host that mounts it at a path of its own (the
   * `handler` already serves it at `{basePath}/watch` and `config.live.paths`).
   */
  watch(request: Request): Promise<Response>;
  /** This process's open streams: `size`, and `close()` to end them all (a server shutting down). */
  /** The live hub: event streams, and open tunnels re-decided at each IAM change. */
  readonly live: Pick<import('./live/hub.js').LiveHub, 'size' | 'close' | 'add' | 'remove'>;
  readonly config: Readonly<ComputeConfig> & { basePath: string };
  readonly database: Database;
  readonly iam: IamBridge;
  /** The embedded Better IAM's own service, when the configuration does not bring its own IAM. */
  readonly embeddedIam: Iam | undefined;
  /** The live route table. */
  routes(): RouteInfo[];
  migrate(): Promise<MigrateResult>;
  migrationStatus(): Promise<MigrationStatus[]>;
  /**
   * The health checks. With `pkiPath` (the doctor command passes --pki, the configuration's `pki`
   * or the default) or a configured `pki`, the PKI bundle's checks are included.
   */
  doctor(options?: { pkiPath?: string }): Promise<DoctorReport>;
  /** Runs background work for the given roles until the returned stop is called. */
  startWorkers(roles: WorkerRole[]): { stop(): Promise<void> };
  /**
   * Runs the jobs due now (of the given kinds, or all) in this process, once, and answers how many
   * ran: for a caller that moves its own clock (the simulator) instead of running workers.
   */
  runDueJobs(kinds?: readonly string[]): Promise<number>;
  /** The deployment's gauges now, for `/metrics` (workers/gauges.ts): a few aggregate queries. */
  gauges(): Promise<GaugeFamily[]>;
  close(): Promise<void>;
}
