/**
 * The audit log's Merkle tree is RFC 6962's, which the destructive-batch quorum shares: the one
 * implementation lives in core (`@better-compute/core/merkle`), where the daemon can import it too.
 */
export * from '@better-compute/core/merkle';
