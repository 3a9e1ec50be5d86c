import type { Readable } from 'node:stream';
import type { Db, Queryable } from '../db/pool.js';
import { z } from 'zod';
import { serviceError } from '../errors.js';
import { refuse } from '../validation.js';
import { newId } from '../ids.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import * as repo from './repository.js';
import { StorageLimitError, type FileStorage, type StoredObject } from './storage.js';

export type { FileRow } from './repository.js';

/** Purposes a caller may upload with (spec 1). Files the platform writes itself carry batch_output. */
export const UPLOAD_PURPOSES = ['batch', 'attachments', 'vision', 'assistants', 'user_data'] as const;
export type UploadPurpose = (typeof UPLOAD_PURPOSES)[number];

export const newFileId = (): string => newId('file_');

/** An upload's text fields: purpose is checked as it arrives, before the file's bytes are read. */
export const uploadFields = z.object({
  purpose: z
    .string()
    .optional()
    .transform((value, ctx): UploadPurpose => {
      if (value === undefined || value === '') return refuse(ctx, 'missing_purpose');
      if (!(UPLOAD_PURPOSES as readonly string[]).includes(value)) return refuse(ctx, 'invalid_purpose');
      return value as UploadPurpose;
    })
    .describe(`What the file is for: ${UPLOAD_PURPOSES.join(', ')}.`),
});

/** An upload's bytes, already in storage under the file id, before its row exists. */
export interface StoredUpload extends StoredObject {
  id: string;
  filename: string;
}

/** Streams one upload's file part into storage under `id`; a file over `maxBytes` is 413. */
export async function storeUpload(storage: FileStorage, id: string, stream: Readable, filename: string, maxBytes: number): Promise<StoredUpload> {
  try {
    return { id, filename: filename.slice(0, 512), ...(await storage.write(id, stream, { maxBytes })) };
  } catch (error) {
    if (error instanceof StorageLimitError) throw serviceError('request_too_large', { message: `The file is larger than ${maxBytes} bytes.` });
    throw error;
  }
}

/**
 * Records an upload whose bytes are stored under its id (its purpose already parsed with
 * uploadFields); bytes refused here are removed again.
 */
export async function recordUpload(
  db: Db,
  storage: FileStorage,
  developerId: string,
  upload: { purpose: UploadPurpose; file: StoredUpload | undefined; fileWithoutName: boolean },
): Promise<repo.FileRow> {
  const { purpose, file } = upload;
  if (!file) throw upload.fileWithoutName ? serviceError('missing_filename', { param: 'file' }) : serviceError('missing_file', { param: 'file' });
  try {
    return await repo.insertFile(db, developerId, { id: file.id, purpose, filename: file.filename, bytes: file.bytes, sha256: file.sha256, storageKey: file.id });
  } catch (error) {
    await storage.delete(file.id);
    throw error;
  }
}

/**
 * A file the platform writes itself (a batch's output and error files): streamed to storage,
 * then recorded with `q` (the caller's transaction). Writing the same id again replaces it whole.
 */
export async function writeGeneratedFile(storage: FileStorage, id: string, source: AsyncIterable<string | Buffer>): Promise<StoredObject> {
  return storage.write(id, source);
}

export async function recordGeneratedFile(q: Queryable, developerId: string, file: { id: string; purpose: string; filename: string } & StoredObject): Promise<repo.FileRow> {
  return repo.insertFile(q, developerId, { ...file, storageKey: file.id });
}

export async function getFile(db: Queryable, developerId: string, id: string): Promise<repo.FileRow> {
  const file = await repo.findFile(db, developerId, id);
  if (!file) throw fileNotFound();
  return file;
}

/** The file's bytes as a stream, for GET /v1/files/{id}/content. */
export async function openFileContent(db: Db, storage: FileStorage, developerId: string, id: string): Promise<{ file: repo.FileRow; content: Readable }> {
  const file = await getFile(db, developerId, id);
  if ((await storage.size(file.storage_key)) === undefined) throw serviceError('not_found', { message: 'The content of that file is no longer stored.' });
  return { file, content: storage.read(file.storage_key) };
}

export async function deleteFile(db: Db, storage: FileStorage, developerId: string, id: string) {
  const file = await repo.markFileDeleted(db, developerId, id);
  if (!file) throw fileNotFound();
  await storage.delete(file.storage_key);
  return { id: file.id, object: 'file' as const, deleted: true };
}

export async function listFiles(db: Db, developerId: string, query: { limit?: unknown; after?: unknown; purpose?: unknown }): Promise<Page<ReturnType<typeof formatFile>>> {
  const purpose = typeof query.purpose === 'string' && query.purpose !== '' ? query.purpose : undefined;
  const page = pageRequest({ limit: query.limit, after: acceptIdCursor(query.after, 'file_') });
  return toPage(await repo.listFiles(db, developerId, page, purpose), page, formatFile);
}

/** The OpenAI file object (bytes, created_at in Unix seconds, status) plus its sha256. */
export function formatFile(file: repo.FileRow) {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: Number(file.bytes),
    created_at: Math.floor(file.created_at.getTime() / 1000),
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed' as const,
    status_details: null,
    expires_at: null,
    sha256: file.sha256,
  };
}

/**
 * SDKs that page by object id (the openai SDK sends the last item's id as `after`) get the same
 * cursor as our own next_cursor, which names that id.
 */
export function acceptIdCursor(after: unknown, prefix: string): unknown {
  if (typeof after === 'string' && after.startsWith(prefix)) return Buffer.from(JSON.stringify({ id: after })).toString('base64url');
  return after;
}

const fileNotFound = () => serviceError('not_found', { message: 'No such file.' });
