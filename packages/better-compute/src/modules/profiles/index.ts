/**
 * What the rest of the server uses of the profiles module. The metal module (when it lands) reads a
 * profile to deploy with profileForDeploy, renders it with renderProfile, and fills the
 * ProfileInUse seam of createProfilesModule so a profile its machines use is not deleted.
 */
export { profileForDeploy } from './service.js';
export { renderProfile } from './render.js';
