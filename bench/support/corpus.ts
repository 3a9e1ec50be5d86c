import { deterministicEmbedding } from '../../shared/emulator/embeddings.js';

/**
 * A synthetic corpus for the search benchmarks (vector stores, brains): texts of a few dozen
 * topics over a made-up vocabulary, with skewed word frequencies as real text has, embedded by
 * the emulator's function, so that vectors cluster by topic as real embeddings do.
 */
export interface Corpus {
  texts: string[];
  /** Row-major, `dims` a row, unit length: what PostgreSQL stores (float4). */
  vectors: Float32Array;
  queries: { text: string; vector: number[] }[];
}

export const TOPICS = 48;
const TOPIC_WORDS = 150;
const COMMON_WORDS = 800;
export const CHUNK_WORDS = 180;
const STOPWORDS = 'the of and to in is that for it as with was on be by this are from at or an which have not but they their its can has were will'.split(' ');
const SYLLABLES = 'ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge go gu ha he hi ho ka ke ki ko la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo za ze zo an en in on ar er or al el il ol st tr pr gr cl pl br'.split(' ');

interface Vocabulary {
  topics: string[][];
  common: string[];
}

let vocabulary: Vocabulary | undefined;
function vocabularyOf(): Vocabulary {
  if (vocabulary) return vocabulary;
  const random = mulberry32(1536);
  const seen = new Set<string>();
  const word = () => {
    for (;;) {
      let w = '';
      const syllables = 2 + Math.floor(random() * 3);
      for (let i = 0; i < syllables; i++) w += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
      if (!seen.has(w)) {
        seen.add(w);
        return w;
      }
    }
  };
  vocabulary = {
    topics: Array.from({ length: TOPICS }, () => Array.from({ length: TOPIC_WORDS }, word)),
    common: Array.from({ length: COMMON_WORDS }, word),
  };
  return vocabulary;
}

/** A skewed pick (a few words of a vocabulary are frequent, most are rare), as in real text. */
const skewed = (random: () => number, words: string[]) => words[Math.floor(words.length * random() ** 2.5)]!;

/** A chunk-like text: mostly its topic's words, some of a second topic, common words and stopwords. */
export function topicText(random: () => number, topic: number, words: number): string {
  const { topics, common } = vocabularyOf();
  const second = Math.floor(random() * TOPICS);
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    const r = random();
    out.push(r < 0.45 ? skewed(random, topics[topic]!) : r < 0.55 ? skewed(random, topics[second]!) : r < 0.8 ? skewed(random, common) : STOPWORDS[Math.floor(random() * STOPWORDS.length)]!);
  }
  return out.join(' ');
}

/**
 * `chunks` texts on TOPICS topics and their vectors (the emulator's embedding function), and
 * `queries` other texts of the same topics with theirs. Rows come in groups of `groupSize` (a
 * file, a scope) that keep to one topic for most of their texts, as a document does.
 */
export function makeCorpus(chunks: number, queries: number, shape: { groupSize: number; model: string; dims: number }): Corpus {
  const random = mulberry32(42);
  const texts: string[] = [];
  const vectors = new Float32Array(chunks * shape.dims);
  for (let row = 0; row < chunks; row++) {
    // A file keeps to one topic for most of its chunks, as a document does.
    const fileTopic = Math.floor(row / shape.groupSize) % TOPICS;
    const topic = random() < 0.7 ? fileTopic : Math.floor(random() * TOPICS);
    const text = topicText(random, topic, CHUNK_WORDS - 40 + Math.floor(random() * 80));
    texts.push(text);
    vectors.set(deterministicEmbedding(shape.model, text, shape.dims), row * shape.dims);
  }
  const queryTexts = Array.from({ length: queries }, () => topicText(random, Math.floor(random() * TOPICS), 30 + Math.floor(random() * 90)));
  return { texts, vectors, queries: queryTexts.map((text) => ({ text, vector: deterministicEmbedding(shape.model, text, shape.dims) })) };
}

/** A ~`bytes` document of sentences and paragraphs on a few topics, for ingest. */
export function documentText(random: () => number, bytes: number): string {
  const topic = Math.floor(random() * TOPICS);
  let text = '';
  while (text.length < bytes) {
    let paragraph = '';
    for (let s = 0; s < 5; s++) {
      const sentence = topicText(random, random() < 0.8 ? topic : Math.floor(random() * TOPICS), 8 + Math.floor(random() * 16));
      paragraph += `${sentence[0]!.toUpperCase()}${sentence.slice(1)}. `;
    }
    text += `${paragraph.trim()}\n\n`;
  }
  return text.slice(0, bytes);
}

export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
