/** What the CLI, the simulator and the package's entry import from the fleet module. */
export {
  parseSelector,
  requestTerms,
  matchesSelector,
  type SelectorTerm,
  type SelectorOperator,
} from './reservations/selector.js';
export { place, earliestFit, type FreeGroup, type Allocation } from './reservations/placement.js';
export { runFleetController, CONTROLLER_JOB, type ControllerReport } from './controller.js';
