/**
 * Spec 2's paragraph strategy for reference entries: paragraphs (split at blank lines) packed
 * whole into chunks of at most `maxChars`; a paragraph longer than that is cut at sentence ends,
 * then at spaces, and only a run without any at `maxChars`.
 */
export function chunkParagraphs(text: string, maxChars: number): string[] {
  const paragraphs = text.split(/\n\s*\n/).map((paragraph) => paragraph.trim()).filter(Boolean);
  const pieces = paragraphs.flatMap((paragraph) => (paragraph.length <= maxChars ? [paragraph] : splitLong(paragraph, maxChars)));
  const chunks: string[] = [];
  let current = '';
  for (const piece of pieces) {
    if (current && current.length + 2 + piece.length > maxChars) {
      chunks.push(current);
      current = '';
    }
    current = current ? `${current}\n\n${piece}` : piece;
  }
  if (current) chunks.push(current);
  return chunks.length > 0 ? chunks : [text.slice(0, maxChars)];
}

function splitLong(paragraph: string, maxChars: number): string[] {
  const parts: string[] = [];
  let rest = paragraph;
  while (rest.length > maxChars) {
    const window = rest.slice(0, maxChars);
    const sentence = Math.max(window.lastIndexOf('. '), window.lastIndexOf('! '), window.lastIndexOf('? '), window.lastIndexOf('\n'));
    const space = window.lastIndexOf(' ');
    const cut = sentence > maxChars / 2 ? sentence + 1 : space > maxChars / 2 ? space : maxChars;
    parts.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) parts.push(rest);
  return parts;
}
