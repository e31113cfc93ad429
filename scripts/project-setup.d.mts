/** Types of scripts/project-setup.mjs, for the test set-up that calls it. */
export function startProjectSetup(
  name: string,
  needs: { hostGroups: string[]; console: boolean; guestImage: boolean },
): void;
export function waitForProjectSetup(name: string, options?: { timeoutMs?: number }): Promise<void>;
