/**
 * Bundles the workflow code (webpack) and writes it as JSON to the file named by argv[2]. Run as a
 * child of the worker (bundleWorkflowsInChildProcess), so webpack's memory peak is this short-lived
 * process's, not the long-running worker's.
 */
import { writeFile } from 'node:fs/promises';
import { bundleWorkflows } from './temporal-worker.js';

const target = process.argv[2];
if (!target) throw new Error('usage: bundle-workflows.ts <output file>');
const bundle = await bundleWorkflows();
await writeFile(target, JSON.stringify({ code: bundle.code, sourceMap: bundle.sourceMap }));
