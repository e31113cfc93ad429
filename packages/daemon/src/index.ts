/** The daemon's parts, for tests and for hosts that embed it (`dev --node`). */
export { capabilities, DAEMON_VERSION, runAgent, type AgentOptions } from './agent.js';
export { envelopeBytes, refusal } from './commands.js';
export { endpointOf, sessionUrl } from './http.js';
export { gpuNames, nvidiaGpus, readMachineInventory, type MachineInventory } from './inventory.js';
export { join, type JoinOptions } from './join.js';
export { main } from './main.js';
export { checkRelease, daemonPlatform, type ReleaseCheckOptions } from './release-check.js';
export { StateDir } from './state.js';
export {
  registerStreamTarget,
  StreamRefusal,
  type AttachedTarget,
  type StreamOutput,
  type StreamTargetFactory,
  type StreamTargetRequest,
} from './streams/registry.js';
/** Bare metal's machine side: BMC drivers and the provisioning network (docs/metal-drivers.md). */
export * as metal from './metal/index.js';
