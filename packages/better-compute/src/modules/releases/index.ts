/**
 * What the parts of the server outside modules/ use of the releases module: the gateway serves a
 * stored build to a node's daemon over its session, and the release-pin statements each welcome
 * carries, so a daemon follows the keys' signed changes.
 */
export { artifactPiece } from './artifacts.js';
export { releasePinStatements } from './releases.js';
