/**
 * What an instance's network is, as its spec.json records it (vm-network.ts makes and removes it).
 * A file of its own with nothing behind it, so the ledger (ledger.ts) can name a network it must
 * remove without depending on the code that makes one.
 */

/** What spec.json records of an instance's network. */
export interface InstanceNetwork {
  /** Its /29's index in the range. */
  slot: number;
  /** The network namespace, and the node's end of the veth (links and namespaces are apart). */
  name: string;
  /** The node's end of the veth. */
  hostAddress: string;
  /** The namespace's end of the veth: where the node routes the guest's /30. */
  peerAddress: string;
  /** The namespace's tap address: the guest's default gateway. */
  gateway: string;
  /** The guest's address, without its prefix length (30). */
  address: string;
  /** The guest's virtio NIC's MAC, which its network-config matches. */
  mac: string;
}
