/**
 * What the parts of the server outside modules/ use of the releases module: the gateway serves a
 * stored build to a node's daemon over its session.
 */
export { artifactPiece, SERVED_PIECE_BYTES } from './artifacts.js';
