import { serviceError } from '../errors.js';
import type { Db } from '../db/pool.js';
import { getFile } from '../files/files.js';
import type { FileStorage } from '../files/storage.js';
import type { ChatMessage } from '../providers/types.js';
import { PART_LIMITS } from './chat.js';

/**
 * Content parts that name an uploaded file instead of carrying it: an image as
 * `image_url.url = "svc_file:<id>"`, a document as `file.file_id` (with or without the `svc_file:`
 * prefix). They are resolved server side, before any model is called: the file must be the
 * caller's, within the part's size limit, and really of the part's kind (read from its first
 * bytes, not from its name). The part is then sent to the provider as a data URL, like one the
 * caller inlined, so every adapter handles it the same way.
 */
export async function resolveFileParts(db: Db, storage: FileStorage, developerId: string, messages: ChatMessage[]): Promise<ChatMessage[]> {
  if (!messages.some((message) => Array.isArray(message.content) && message.content.some(namesFile))) return messages;
  return Promise.all(
    messages.map(async (message, index) => {
      if (!Array.isArray(message.content) || !message.content.some(namesFile)) return message;
      const param = `messages.${index}.content`;
      const content = await Promise.all(
        (message.content as Array<Record<string, unknown>>).map(async (part) => {
          if (part.type === 'image_url' && typeof imageUrlOf(part) === 'string' && imageUrlOf(part)!.startsWith(FILE_PREFIX)) {
            const url = await dataUrlOf(db, storage, developerId, imageUrlOf(part)!.slice(FILE_PREFIX.length), 'image', param);
            return { ...part, image_url: { ...(part.image_url as object), url } };
          }
          if (part.type === 'file' && typeof fileIdOf(part) === 'string') {
            const id = fileIdOf(part)!.replace(/^svc_file:/, '');
            const { file_id: _named, ...rest } = part.file as Record<string, unknown>;
            return { ...part, file: { ...rest, file_data: await dataUrlOf(db, storage, developerId, id, 'document', param) } };
          }
          return part;
        }),
      );
      return { ...message, content } as ChatMessage;
    }),
  );
}

const FILE_PREFIX = 'svc_file:';
const imageUrlOf = (part: Record<string, unknown>) => (part.image_url as { url?: unknown } | undefined)?.url as string | undefined;
const fileIdOf = (part: Record<string, unknown>) => (part.file as { file_id?: unknown } | undefined)?.file_id as string | undefined;
const namesFile = (part: unknown) => {
  const p = part as Record<string, unknown>;
  return (p.type === 'image_url' && typeof imageUrlOf(p) === 'string' && imageUrlOf(p)!.startsWith(FILE_PREFIX)) || (p.type === 'file' && typeof fileIdOf(p) === 'string');
};

async function dataUrlOf(db: Db, storage: FileStorage, developerId: string, id: string, kind: 'image' | 'document', param: string): Promise<string> {
  const file = await getFile(db, developerId, id).catch(() => {
    throw serviceError('invalid_content_part', { param, message: `No file ${id} belongs to this account.` });
  });
  const limit = kind === 'image' ? PART_LIMITS.imageBytes : PART_LIMITS.documentBytes;
  if (Number(file.bytes) > limit) throw serviceError('content_part_too_large', { param, message: `File ${id} is ${file.bytes} bytes; a ${kind} part is at most ${limit}.` });
  const bytes = await readAll(storage, file.storage_key, limit);
  const mediaType = sniffMediaType(bytes);
  const fits = kind === 'image' ? mediaType?.startsWith('image/') : mediaType === 'application/pdf';
  if (!fits) throw serviceError('invalid_content_part', { param, message: `File ${id} is not ${kind === 'image' ? 'a PNG, JPEG, GIF or WebP image' : 'a PDF document'}.` });
  return `data:${mediaType};base64,${bytes.toString('base64')}`;
}

async function readAll(storage: FileStorage, key: string, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of storage.read(key)) {
    total += (chunk as Buffer).length;
    if (total > limit) throw serviceError('content_part_too_large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The media type a file's first bytes announce, for the kinds a content part may carry. */
export function sniffMediaType(bytes: Buffer): string | undefined {
  const starts = (signature: number[], offset = 0) => signature.every((byte, i) => bytes[offset + i] === byte);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (starts([0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (starts([0x47, 0x49, 0x46, 0x38])) return 'image/gif';
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return 'image/webp';
  if (starts([0x25, 0x50, 0x44, 0x46, 0x2d])) return 'application/pdf';
  return undefined;
}
