/** Types of scripts/host-tools.mjs, for the tests that ask what is missing. */
export const HOST_TOOL_GROUPS: Record<string, Record<string, string>>;
export function toolsOf(groups: string[]): Record<string, string>;
export function missingTools(groups: string[]): string[];
export function installCommand(groups: string[]): string | null;
export function installHostTools(
  groups: string[],
  options?: { log?: (line: string) => void; why?: string },
): string[];
