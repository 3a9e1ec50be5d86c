/**
 * Entry point of the CPU pool's threads. Each named export is one task, run with
 * `piscina.run(input, { name })`; the work itself lives in shared/ and is tested there.
 */
export { cosineTopK } from '../../shared/scoring/cosine.js';
export { dotTopK, kMeans } from '../../shared/scoring/vector-index.js';
export { compositeTopK } from '../../shared/scoring/composite.js';
export { scanSecrets } from '../../shared/scanning/secrets.js';
