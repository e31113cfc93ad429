/**
 * A setup file of the projects whose host set-up runs in the background (test/global-setup.ts):
 * each of their files waits here until its project's set-up has ended, and fails with the set-up's
 * own error when it did.
 */
import { waitForProjectSetup } from '../scripts/project-setup.mjs';

const project = process.env.BETTER_COMPUTE_TEST_PROJECT;
if (project) await waitForProjectSetup(project);
