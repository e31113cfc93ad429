/** The version this daemon build is: what its Hello says and what a release must be newer than. */
export const DAEMON_VERSION = '0.1.0';
