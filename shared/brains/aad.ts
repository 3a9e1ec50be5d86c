/**
 * What each sealed value of a brain is bound to (AES-GCM associated data): a sealed title, body,
 * chunk or vector opens only as the brain, entry, chunk and space it was sealed for.
 */
export const titleAad = (brainId: string, entryId: string) => `brain-title ${brainId}/${entryId}`;
export const bodyAad = (brainId: string, entryId: string) => `brain-body ${brainId}/${entryId}`;
export const chunkAad = (brainId: string, entryId: string, chunkIndex: number) => `brain-chunk ${brainId}/${entryId}/${chunkIndex}`;
export const vectorAad = (brainId: string, space: number, entryId: string, chunkIndex: number) => `brain-vector ${brainId}/${space}/${entryId}/${chunkIndex}`;
/** Learning's sealed JSON: a pass's transcript or extraction, a proposal's or a conflict's candidate memory. */
export const learningAad = (brainId: string, kind: 'transcript' | 'extracted' | 'proposal' | 'conflict', id: string) => `brain-${kind} ${brainId}/${id}`;
/** A pack version's sealed title, body, chunk or vector (under the pack's key). */
export const packAad = (part: 'title' | 'body' | 'chunk' | 'vector', versionId: string, entryId: string, chunkIndex?: number) =>
  `pack-${part} ${versionId}/${entryId}${chunkIndex === undefined ? '' : `/${chunkIndex}`}`;
