/** The release this build is; `system.version` and `better-compute version` both report it. */
export const VERSION = '0.1.0';
export const PRODUCT = 'better-compute';
/** What `better-compute version` prints. */
export const VERSION_LINE = `${PRODUCT} ${VERSION}`;
