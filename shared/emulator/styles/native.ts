import type { EmulatorStyle } from '../server.js';
import { anthropicStyle } from './native/anthropic.js';
import { cohereStyle } from './native/cohere.js';
import { geminiStyle } from './native/gemini.js';

/** The providers with their own wire format: Anthropic's Messages API, Gemini and Cohere v2. */
export const nativeStyles: EmulatorStyle[] = [anthropicStyle, geminiStyle, cohereStyle];
