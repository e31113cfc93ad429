/** better-compute: the control plane's server side. The CLI is `better-compute/cli`. */
export {
  betterCompute,
  actionCatalog,
  builtinModules,
  DEFAULT_BASE_PATH,
  type BetterComputeOptions,
} from './compute.js';
export { defineConfig, type ComputeConfig } from './config/define-config.js';
export {
  loadConfig,
  loadCompute,
  findConfigFile,
  type LoadConfigOptions,
  type LoadedConfig,
} from './config/load-config.js';
export {
  defineModule,
  bindMethod,
  implement,
  type ComputeModule,
  type ImplementedGroup,
  type MethodBinding,
  type CallContext,
  type EventDraft,
  type GaugeFamily,
  type MethodHandler,
} from './modules/define-module.js';
export type { ComputeInstance, DoctorFinding, DoctorReport, WorkerRole } from './types.js';
export { enqueueJob, claimJobs, completeJob, failJob } from './workers/jobs.js';
export { acquireLease, releaseLease } from './workers/leases.js';
export { ComputeError } from '@better-compute/core';
export { serve, type ServeOptions } from './host/serve.js';
export { createMetrics, type Metrics } from './host/metrics.js';
export {
  AccessNote,
  accessLogger,
  lineBatch,
  type AccessEntry,
  type LineBatch,
  type LogFormat,
} from './host/access-log.js';
export { attachNodeRoutes, type NodeRoutes, type NodeRoutesOptions } from './host/node-routes.js';
export { type ClientAddressOf, configuredClientAddress } from './host/client-address.js';
export { parseSelector, requestTerms, matchesSelector, runFleetController } from './modules/fleet/index.js';
export { runSimulation, startSimulatedFleet } from './sim/index.js';
export { attachGateway, type Gateway, type GatewayOptions } from './gateway/session-server.js';
export { createNodeStreams, type NodeStreamsOptions } from './gateway/streams.js';
export type { NodeStream, NodeStreamEnd, NodeStreams, NodeStreamTarget } from './gateway/node-streams.js';
export { type CommandSigner, ed25519CommandSigner, generatedCommandSigner } from './gateway/signer.js';
export { createPkiBundle, type CreatePkiOptions } from './pki/create.js';
export { readPkiBundle, type PkiBundle } from './pki/bundle.js';
export { gatewayTlsFromFiles, type GatewayTls } from './gateway/tls.js';
