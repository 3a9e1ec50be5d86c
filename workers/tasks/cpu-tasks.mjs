// Entry point of the CPU pool's threads. A new thread has no TypeScript loader, whatever flags
// started the process, so it registers tsx before loading the typed task module.
//
// No top-level await: piscina loads this file with require() first, and Node 20 (require of ES
// modules) refuses a module that awaits at its top (ERR_REQUIRE_ASYNC_MODULE), so piscina fell back
// to import(). A CI run aborted once in that require path (V8's "IsGraphAsync must be used on an
// instantiated module", piscina's worker.js); without the await, require() loads the file at once
// and the fallback never runs. Each task awaits the typed module instead.
import { register } from 'tsx/esm/api';

register();
const tasks = import('./cpu-tasks.ts');

export const cosineTopK = async (input) => (await tasks).cosineTopK(input);
export const dotTopK = async (input) => (await tasks).dotTopK(input);
export const kMeans = async (input) => (await tasks).kMeans(input);
export const compositeTopK = async (input) => (await tasks).compositeTopK(input);
export const scanSecrets = async (input) => (await tasks).scanSecrets(input);
