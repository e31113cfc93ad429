/**
 * Bare metal, the machine side: BMC drivers (IPMI over LAN, Redfish) and the site's provisioning
 * network service (DHCP, TFTP and iPXE with per-MAC boot entries and PXE discovery). The control
 * plane's `metal` module drives these through a site agent; see docs/metal-drivers.md.
 */
export {
  BmcError,
  BMC_ERROR_CODES,
  BOOT_DEVICES,
  POWER_ACTIONS,
  waitForPowerState,
  type BmcCredentials,
  type BmcDriver,
  type BmcFailure,
  type BootDevice,
  type BootDeviceOptions,
  type PowerAction,
  type PowerChange,
  type PowerState,
} from './bmc.js';
export { createIpmiDriver, IpmiDriver, type IpmiTarget } from './ipmi.js';
export {
  createRedfishDriver,
  normalizeFingerprint,
  RedfishDriver,
  type RedfishTarget,
  type RedfishTrust,
} from './redfish.js';
export { checkCmdline, CMDLINE_LIMIT, type BootEntry, type NetworkBoot } from './boot-entries.js';
export { dhcpRequestsOf, parseDhcpRequest, uuidOfOption97, type DhcpRequest } from './dhcp-capture.js';
export {
  planSubnet,
  ProvisioningNetwork,
  type DiscoveryEvent,
  type ProvisioningNetworkOptions,
} from './provisioning-network.js';
export {
  namesOf,
  sweepProvisioningNetwork,
  type ProvisioningNames,
  type ProvisioningSweep,
} from './provisioning-host.js';

import type { BmcDriver } from './bmc.js';
import { createIpmiDriver, type IpmiTarget } from './ipmi.js';
import { createRedfishDriver, type RedfishTarget } from './redfish.js';

/** A BMC as the control plane names it: its protocol and how to reach it. */
export type BmcTarget = ({ protocol: 'ipmi' } & IpmiTarget) | ({ protocol: 'redfish' } & RedfishTarget);

/** The driver for a BMC, by its protocol. */
export function createBmcDriver(target: BmcTarget): BmcDriver {
  return target.protocol === 'ipmi' ? createIpmiDriver(target) : createRedfishDriver(target);
}
