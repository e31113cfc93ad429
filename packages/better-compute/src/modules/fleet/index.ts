/**
 * What the parts of the server outside modules/ (the package's entry, the simulator, the gateway,
 * the command line) use of the fleet module.
 */
export {
  parseSelector,
  requestTerms,
  matchesSelector,
  type SelectorTerm,
  type SelectorOperator,
} from './reservations/selector.js';
export { place, earliestFit, type FreeGroup, type Allocation } from './reservations/placement.js';
export { runFleetController, CONTROLLER_JOB, type ControllerReport } from './controller.js';
export { nodeTenant } from './queries.js';
