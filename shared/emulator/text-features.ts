/**
 * The features of a text that the emulator's embeddings and rerank scores are made of: lowercased
 * word tokens, lightly stemmed (so "passwords" meets "password" and "resetting" meets "reset"), and
 * the bigrams of neighbouring content words. Stopwords count, but little, so a text of only
 * stopwords still has features. Each feature is a 32-bit hash, computed without building strings
 * for bigrams, so 2,048 inputs of 1,000 characters take a few tens of milliseconds.
 */

export interface TextFeature {
  hash: number;
  weight: number;
}

const UNIGRAM_WEIGHT = 1;
const STOPWORD_WEIGHT = 0.2;
const BIGRAM_WEIGHT = 0.6;

const STOPWORDS = new Set(
  (
    'a an and are as at be but by can could do does did for from had has have how i if in into is it its me my no not of on or our ' +
    'so than that the their them then there these they this to was we were what when where which who why will with would you your'
  ).split(' '),
);

const WORD = /[\p{L}\p{N}]+/gu;

export function tokenize(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

const VOWEL = /[aeiouy]/;

/** A light suffix stemmer in the spirit of Porter's first steps: plurals, -ing/-ed, a few derivations. */
export function stem(word: string): string {
  if (word.length <= 3 || /\d/.test(word)) return word;
  let w = word;
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us') && !w.endsWith('is')) w = w.slice(0, -1);

  if (w.endsWith('ational')) w = `${w.slice(0, -7)}ate`;
  else if (w.endsWith('ization')) w = `${w.slice(0, -7)}ize`;
  else if (w.endsWith('ation') && w.length > 7) w = `${w.slice(0, -5)}ate`;

  for (const suffix of ['ing', 'ed']) {
    const base = w.slice(0, -suffix.length);
    if (w.endsWith(suffix) && base.length >= 3 && VOWEL.test(base)) {
      w = undouble(base);
      break;
    }
  }
  for (const suffix of ['fulness', 'ness', 'ment', 'ful', 'ly']) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 4) {
      w = w.slice(0, -suffix.length);
      break;
    }
  }
  if (w.endsWith('y') && w.length > 4 && !VOWEL.test(w[w.length - 2]!)) w = `${w.slice(0, -1)}i`;
  if (w.endsWith('e') && w.length > 4) w = w.slice(0, -1);
  return w;
}

/** "stopp" -> "stop", "resett" -> "reset"; a doubled l, s or z stays ("fall", "pass"). */
function undouble(word: string): string {
  const last = word[word.length - 1]!;
  return last === word[word.length - 2] && !'lsz'.includes(last) && !VOWEL.test(last) ? word.slice(0, -1) : word;
}

/** FNV-1a over the word's UTF-16 units, from a seed. */
function hashWord(word: string, seed: number): number {
  let hash = seed >>> 0;
  for (let i = 0; i < word.length; i++) {
    hash ^= word.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return finish(hash);
}

/** murmur3's finaliser: spreads every input bit over the whole 32-bit result. */
export function finish(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export const seedOf = (label: string) => hashWord(label, 0x811c9dc5);

/**
 * The weighted features of a text in the hash space of `seed` (a model's own space). A text with
 * no words has one feature of its own, so every text has a vector.
 */
export function textFeatures(text: string, seed: number): TextFeature[] {
  const features: TextFeature[] = [];
  let previous: number | undefined;
  for (const token of tokenize(text)) {
    const stopword = STOPWORDS.has(token);
    const hash = hashWord(stopword ? token : stem(token), seed);
    features.push({ hash, weight: stopword ? STOPWORD_WEIGHT : UNIGRAM_WEIGHT });
    if (stopword) {
      previous = undefined;
      continue;
    }
    if (previous !== undefined) features.push({ hash: finish(Math.imul(previous, 31) ^ (hash + 0x9e3779b9)), weight: BIGRAM_WEIGHT });
    previous = hash;
  }
  if (features.length === 0) features.push({ hash: finish(seed ^ 0x5bd1e995), weight: 1 });
  return features;
}
