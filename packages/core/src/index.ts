export * from './errors.js';
export * from './ids.js';
export * from './durations.js';
export * from './positions.js';
export * from './terminal-safe.js';
export * from './contract.js';
export * from './bridge.js';
export * from './http.js';
export { PRODUCT, VERSION, VERSION_LINE } from './version.js';
