/** Types of scripts/ensure.mjs, for the test set-up that calls it. */
export function ensureDependencies(): void;
export function ensurePackagesBuilt(): void;
export function ensureConsoleBuilt(): void;
/** Installs what is missing of the host tool groups (as root); returns the commands still missing. */
export function ensureHostTools(groups: string[], why: string): Promise<string[]>;
/** Runs fn while holding the named lock under node_modules/.locks (a second holder waits). */
export function withLock<T>(name: string, fn: () => T): T;
