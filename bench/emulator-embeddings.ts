import { deterministicEmbedding } from '../shared/emulator/embeddings.js';
import type { Row } from './support/report.js';

/**
 * How fast the upstream emulator embeds: 2,048 inputs of 1,000 characters (the most one
 * embeddings call may carry) at each model's full size, in this process. The target is
 * well under a second per call of that size.
 */
const WORDS = 'the gateway routes each request to its provider meters the tokens it used and settles the charge against the wallet of the customer who made the call while webhooks report what happened'.split(' ');

export function runEmulatorEmbeddingsBench(options: { inputs: number; characters: number; rounds: number }): { rows: Row[]; slowestMs: number } {
  const inputs = Array.from({ length: options.inputs }, (_, i) => {
    let text = '';
    for (let j = i; text.length < options.characters; j = (j * 7 + 3) % 9973) text += `${WORDS[j % WORDS.length]} `;
    return text.slice(0, options.characters);
  });
  const rows: Row[] = [];
  let slowestMs = 0;
  for (const [model, dimensions] of [['text-embedding-3-small', 1536], ['text-embedding-3-large', 3072], ['text-embedding-004', 768]] as const) {
    const times: number[] = [];
    for (let round = 0; round < options.rounds; round++) {
      const started = performance.now();
      for (const input of inputs) deterministicEmbedding(model, input, dimensions);
      times.push(performance.now() - started);
    }
    const best = Math.min(...times);
    const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
    slowestMs = Math.max(slowestMs, median);
    rows.push({ model, dimensions, inputs: options.inputs, 'characters each': options.characters, 'median ms': median.toFixed(0), 'best ms': best.toFixed(0), 'inputs/s': Math.round((options.inputs / median) * 1000) });
  }
  return { rows, slowestMs };
}
