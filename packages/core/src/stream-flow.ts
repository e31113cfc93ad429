/**
 * The bounds of the byte streams a node session multiplexes (consoles, forwarded ports, sandbox
 * logins), shared by the daemon, the gateway, the tunnel route and the CLI so each side pauses and
 * gives up at the same figures. A sender stops above the high-water mark of bytes not yet
 * acknowledged (or not yet written out) and goes on under the low-water mark; a reader further
 * behind than the disconnect mark is dropped rather than buffered without bound.
 */
export const STREAM_HIGH_WATER_BYTES = 4 * 1024 * 1024;
export const STREAM_LOW_WATER_BYTES = 1024 * 1024;
export const STREAM_DISCONNECT_BYTES = 16 * 1024 * 1024;
/** The largest data frame: bytes above it are sent in several frames. */
export const STREAM_FRAME_BYTES = 64 * 1024;
/**
 * Streams one node session carries at once; both ends refuse more. Idle streams cost a few KiB
 * each (bench/tunnel.mjs), and each busy one at most the high-water mark in flight.
 */
export const MAX_NODE_STREAMS = 256;
