import { Tiktoken } from 'js-tiktoken/lite';
import cl100k_base from 'js-tiktoken/ranks/cl100k_base';
import { z } from 'zod';

/**
 * OpenAI's file chunking for vector stores: the text is tokenised with cl100k_base and cut into
 * windows of at most `max_chunk_size_tokens` tokens, each starting `max - overlap` tokens after the
 * one before, so consecutive chunks share `chunk_overlap_tokens` tokens. `auto` is 800 / 400.
 */
export interface StaticChunking {
  max_chunk_size_tokens: number;
  chunk_overlap_tokens: number;
}

export const AUTO_CHUNKING = { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } as const satisfies StaticChunking;

export const MIN_CHUNK_SIZE_TOKENS = 100;
export const MAX_CHUNK_SIZE_TOKENS = 4096;

/** The request's `chunking_strategy`: `{type: 'auto'}` or `{type: 'static', static: {…}}`. */
export const chunkingStrategyParam = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('auto') }),
  z
    .strictObject({
      type: z.literal('static'),
      static: z.strictObject({
        max_chunk_size_tokens: z.number().int().min(MIN_CHUNK_SIZE_TOKENS).max(MAX_CHUNK_SIZE_TOKENS),
        chunk_overlap_tokens: z.number().int().min(0),
      }),
    })
    .refine((value) => value.static.chunk_overlap_tokens <= value.static.max_chunk_size_tokens / 2, {
      message: 'chunk_overlap_tokens must not exceed half of max_chunk_size_tokens.',
      path: ['static', 'chunk_overlap_tokens'],
    }),
]);
export type ChunkingStrategyParam = z.infer<typeof chunkingStrategyParam>;

export interface Chunk {
  index: number;
  text: string;
  tokens: number;
}

let encoder: Tiktoken | undefined;

/** Built on first use (a few hundred milliseconds: the rank table is parsed), then shared. */
function cl100k(): Tiktoken {
  encoder ??= new Tiktoken(cl100k_base);
  return encoder;
}

/**
 * A multi-byte character (emoji, CJK) can span two or more tokens; a window may neither start nor
 * end inside one, or its decoded text would carry U+FFFD halves. Such a cut moves back to the
 * nearest character boundary: usually a token or two, at most MAX_SHIFT (past that, in text made of
 * tokens that each straddle two characters, the cut stays where it is).
 */
const MAX_SHIFT = 16;
/** A UTF-8 character has at most 4 bytes and a token at least one: at most 3 tokens hold its bytes on either side of a cut. */
const CHAR_SPAN = 3;

export function chunkText(text: string, strategy: StaticChunking): Chunk[] {
  const { max_chunk_size_tokens: max, chunk_overlap_tokens: overlap } = strategy;
  if (!Number.isInteger(max) || max < 1 || !Number.isInteger(overlap) || overlap < 0 || overlap >= max) {
    throw new RangeError(`Invalid chunking strategy: max_chunk_size_tokens ${max}, chunk_overlap_tokens ${overlap}.`);
  }
  if (text === '') return [];
  const enc = cl100k();
  // Special-token strings such as <|endoftext|> in a document are ordinary text here, not control tokens.
  const tokens = enc.encode(text, [], []);
  const total = tokens.length;
  // The nearest character boundary at or before `at` and after `floor`; `at` itself when none is near.
  const retreat = (at: number, floor: number): number => {
    for (let p = at; p > floor && p >= at - MAX_SHIFT; p--) if (charBoundary(enc, tokens, p)) return p;
    return at;
  };

  const chunks: Chunk[] = [];
  let start = 0;
  for (;;) {
    // Ends move back, so a chunk never exceeds max.
    const end = retreat(Math.min(start + max, total), start);
    const window = tokens.slice(start, end);
    chunks.push({ index: chunks.length, text: enc.decode(window), tokens: window.length });
    if (end >= total) break;
    // Starts move back too: the overlap grows by a token or two rather than losing part of a character.
    start = retreat(Math.max(end - overlap, start + 1), start);
  }
  return chunks;
}

/**
 * Whether a cut before token `at` falls between two characters. The text is valid UTF-8, so at a
 * character boundary the bytes on either side decode independently to the same string as together;
 * a cut inside a character turns its one character into two or more U+FFFD.
 */
function charBoundary(enc: Tiktoken, tokens: number[], at: number): boolean {
  if (at <= 0 || at >= tokens.length) return true;
  const before = tokens.slice(Math.max(0, at - CHAR_SPAN), at);
  const after = tokens.slice(at, at + CHAR_SPAN);
  return enc.decode(before) + enc.decode(after) === enc.decode([...before, ...after]);
}
