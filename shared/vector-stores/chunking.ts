import cl100k_base from 'js-tiktoken/ranks/cl100k_base';
import { z } from 'zod';

/**
 * OpenAI's file chunking for vector stores: the text is tokenised with cl100k_base and cut into
 * windows of at most `max_chunk_size_tokens` tokens, each starting `max - overlap` tokens after the
 * one before, so consecutive chunks share `chunk_overlap_tokens` tokens. `auto` is 800 / 400.
 *
 * The ranks and the split pattern are js-tiktoken's (js-tiktoken/ranks/cl100k_base); the byte-pair
 * merge is done here. js-tiktoken's own merge rescans and re-keys every pair of a piece after each
 * merge, quadratic in the piece's length: 20,000 CJK characters without punctuation (one piece)
 * took 179 s, 100,000 characters of ordinary Japanese 1.3 s. This one keeps the candidate pairs in
 * a heap (n log n) and gives the same tokens (test/vector-store-parsing.test.ts compares them).
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
        max_chunk_size_tokens: z.int32().min(MIN_CHUNK_SIZE_TOKENS).max(MAX_CHUNK_SIZE_TOKENS),
        chunk_overlap_tokens: z.int32().min(0),
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

/**
 * cl100k_base with a heap-ordered byte-pair merge. Bytes are held as binary strings (one char per
 * byte, 0-255): an ASCII piece is its own key, and a token's bytes are its decode.
 */
class Cl100k {
  private readonly ranks = new Map<string, number>();
  private readonly bytes: string[] = [];
  private readonly pattern: RegExp;
  /**
   * The tokens of pieces that needed a merge. Text repeats its words, so most pieces have been
   * merged before: a look-up instead of a merge made tokenising 2 MB of prose several times faster.
   * Bounded: emptied when full, so odd input cannot grow it without limit.
   */
  private readonly merged = new Map<string, number[]>();

  constructor() {
    for (const line of cl100k_base.bpe_ranks.split('\n')) {
      if (line === '') continue;
      const [, offset, ...tokens] = line.split(' ');
      const first = Number.parseInt(offset!, 10);
      tokens.forEach((token, i) => {
        const bytes = Buffer.from(token, 'base64').toString('latin1');
        this.ranks.set(bytes, first + i);
        this.bytes[first + i] = bytes;
      });
    }
    this.pattern = new RegExp(cl100k_base.pat_str, 'gu');
  }

  /** The same tokens as js-tiktoken's cl100k_base `encode(text, [], [])`: special-token strings are plain text. */
  encode(text: string): number[] {
    const tokens: number[] = [];
    for (const match of text.matchAll(this.pattern)) {
      const piece = match[0];
      const bytes = ASCII.test(piece) ? piece : Buffer.from(piece, 'utf8').toString('latin1');
      const whole = this.ranks.get(bytes);
      if (whole !== undefined) tokens.push(whole);
      else if (bytes.length > CACHED_PIECE_BYTES) this.merge(bytes, tokens);
      else for (const token of this.mergedTokens(bytes)) tokens.push(token);
    }
    return tokens;
  }

  private mergedTokens(bytes: string): number[] {
    let tokens = this.merged.get(bytes);
    if (tokens === undefined) {
      tokens = [];
      this.merge(bytes, tokens);
      if (this.merged.size >= MERGED_PIECES_KEPT) this.merged.clear();
      this.merged.set(bytes, tokens);
    }
    return tokens;
  }

  decode(tokens: number[]): string {
    let bytes = '';
    for (const token of tokens) bytes += this.bytes[token] ?? '';
    return Buffer.from(bytes, 'latin1').toString('utf8');
  }

  /** Whether a token starts a character (its first byte is not a UTF-8 continuation byte). */
  startsCharacter(token: number): boolean {
    return ((this.bytes[token]?.charCodeAt(0) ?? 0) & 0xc0) !== 0x80;
  }

  /**
   * Byte-pair merge of one piece: the adjacent pair whose joined bytes rank lowest merges first,
   * the leftmost on a tie, until no pair is a token. Parts are a linked list by start offset; the
   * heap holds rank * 2^32 + start for each candidate pair, and an entry whose pair has since
   * changed is skipped when it surfaces.
   */
  private merge(bytes: string, out: number[]): void {
    const n = bytes.length;
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    const alive = new Uint8Array(n).fill(1);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1;
      prev[i] = i - 1;
    }
    const heap = new MinHeap();
    const pairRank = (start: number): number | undefined => {
      const middle = next[start]!;
      return middle < n ? this.ranks.get(bytes.slice(start, next[middle] ?? n)) : undefined;
    };
    const offer = (start: number) => {
      const rank = pairRank(start);
      if (rank !== undefined) heap.push(rank * 2 ** 32 + start);
    };
    for (let i = 0; i + 1 < n; i++) offer(i);
    while (heap.size > 0) {
      const entry = heap.pop();
      const start = entry % 2 ** 32;
      if (!alive[start] || pairRank(start) !== Math.floor(entry / 2 ** 32)) continue;
      const absorbed = next[start]!;
      alive[absorbed] = 0;
      next[start] = next[absorbed]!;
      if (next[start]! < n) prev[next[start]!] = start;
      offer(start);
      if (prev[start]! >= 0) offer(prev[start]!);
    }
    for (let start = 0; start < n; start = next[start]!) out.push(this.ranks.get(bytes.slice(start, next[start]))!);
  }
}

const ASCII = /^[\x00-\x7f]*$/;
const MERGED_PIECES_KEPT = 100_000;
/** Longer pieces (a run of CJK text without punctuation is one piece) are merged each time, not kept. */
const CACHED_PIECE_BYTES = 64;

class MinHeap {
  private readonly items: number[] = [];

  get size(): number {
    return this.items.length;
  }

  push(value: number): void {
    const items = this.items;
    let i = items.push(value) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]! <= value) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = value;
  }

  pop(): number {
    const items = this.items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= items.length) break;
        const child = left + 1 < items.length && items[left + 1]! < items[left]! ? left + 1 : left;
        if (items[child]! >= last) break;
        items[i] = items[child]!;
        i = child;
      }
      items[i] = last;
    }
    return top;
  }
}

let encoder: Cl100k | undefined;

/** Built on first use (about 0.2 s: the rank table is parsed), then shared. */
function cl100k(): Cl100k {
  encoder ??= new Cl100k();
  return encoder;
}

/** The cl100k_base tokens of `text`, as the chunks count them (special-token strings are plain text). */
export function encodeCl100k(text: string): number[] {
  return cl100k().encode(text);
}

/**
 * A multi-byte character (emoji, CJK) can span two or more tokens; a window may neither start nor
 * end inside one, or its decoded text would carry U+FFFD halves. Such a cut moves back to the
 * nearest token that starts a character: usually a token or two, at most MAX_SHIFT (past that, in
 * text made of tokens that each straddle two characters, the cut stays where it is).
 */
const MAX_SHIFT = 16;

export function chunkText(text: string, strategy: StaticChunking): Chunk[] {
  const { max_chunk_size_tokens: max, chunk_overlap_tokens: overlap } = strategy;
  if (!Number.isInteger(max) || max < 1 || !Number.isInteger(overlap) || overlap < 0 || overlap >= max) {
    throw new RangeError(`Invalid chunking strategy: max_chunk_size_tokens ${max}, chunk_overlap_tokens ${overlap}.`);
  }
  if (text === '') return [];
  const enc = cl100k();
  const tokens = enc.encode(text);
  const total = tokens.length;
  // The nearest character boundary at or before `at` and after `floor`; `at` itself when none is near.
  const retreat = (at: number, floor: number): number => {
    for (let p = at; p > floor && p >= at - MAX_SHIFT; p--) if (p >= total || enc.startsCharacter(tokens[p]!)) return p;
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
