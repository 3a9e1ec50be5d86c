// Entry point of the CPU pool's threads. A new thread has no TypeScript loader, whatever flags
// started the process, so it registers tsx before loading the typed task module.
import { register } from 'tsx/esm/api';

register();
export const { cosineTopK, dotTopK, kMeans, compositeTopK, scanSecrets } = await import('./cpu-tasks.ts');
