import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { parseBody, type Endpoint } from './endpoint.js';

/**
 * `POST .../moderations`: an input is flagged exactly when it contains the word `EMULATOR_FLAG`
 * (as `violence`), so tests reach the moderation paths on purpose and never by accident.
 */

const CATEGORIES = [
  'harassment',
  'harassment/threatening',
  'hate',
  'hate/threatening',
  'illicit',
  'illicit/violent',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'sexual',
  'sexual/minors',
  'violence',
  'violence/graphic',
] as const;
const FLAGGED_CATEGORY = 'violence';
const IMAGE_CATEGORIES = new Set(['self-harm', 'self-harm/intent', 'self-harm/instructions', 'sexual', 'violence', 'violence/graphic']);

const Part = z.looseObject({ type: z.string(), text: z.string().optional() });
const ModerationRequest = z.looseObject({
  model: z.string().optional(),
  input: z.union([z.string(), z.array(z.string()).min(1), z.array(Part).min(1)]),
});

function classify(text: string, hasImage: boolean) {
  const flagged = /\bEMULATOR_FLAG\b/.test(text);
  const digest = createHash('sha256').update(text).digest();
  const categories = Object.fromEntries(CATEGORIES.map((category) => [category, flagged && category === FLAGGED_CATEGORY]));
  // Unflagged scores are small and stable; the flagged category scores high.
  const scores = Object.fromEntries(CATEGORIES.map((category, i) => [category, flagged && category === FLAGGED_CATEGORY ? 0.97 : digest[i]! / 255 / 1000]));
  const applied = Object.fromEntries(CATEGORIES.map((category) => [category, hasImage && IMAGE_CATEGORIES.has(category) ? ['text', 'image'] : ['text']]));
  return { flagged, categories, category_scores: scores, category_applied_input_types: applied };
}

export const moderations: Endpoint = {
  path: '/moderations',
  kind: 'moderation',
  defaultModel: 'omni-moderation-latest',
  handle({ res, model, body }) {
    const { input } = parseBody(ModerationRequest, body);
    let results;
    if (typeof input === 'string') {
      results = [classify(input, false)];
    } else if (input.every((item) => typeof item === 'string')) {
      results = (input as string[]).map((text) => classify(text, false));
    } else {
      // One multimodal input (text and image parts) gets one result.
      const parts = input as z.infer<typeof Part>[];
      results = [classify(parts.map((part) => part.text ?? '').join('\n'), parts.some((part) => part.type === 'image_url'))];
    }
    res.json({ id: `modr-${randomBytes(16).toString('hex')}`, model: model.model, results });
  },
};
