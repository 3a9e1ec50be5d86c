import { pipeline } from 'node:stream/promises';
import type { Request } from 'express';
import { z } from 'zod';
import { deleteFile, formatFile, getFile, listFiles, newFileId, openFileContent, recordUpload, storeUpload, uploadFields } from '../../shared/files/files.js';
import { fileStorageFor } from '../../shared/files/storage.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { pageQuery } from '../../shared/pagination.js';
import { principalOf } from '../middleware/authenticate.js';
import { developerKey, route, type RouteDefinition } from '../route-table.js';

/** GET /v1/files: a page, optionally of one purpose (any string; one sent twice reads as absent, as it always has). */
const listQuery = pageQuery.extend({ purpose: z.string().optional().catch(undefined) });

/** Files: multipart uploads streamed to storage (developer keys only), listed, downloaded, deleted. */
export function fileRoutes(platform: GatewayServices): RouteDefinition[] {
  const { db, config } = platform;
  const storage = fileStorageFor(config);
  const developer = (req: Request) => principalOf(req).accountId;
  const surface = 'files';
  return [
    route({
      method: 'post', path: '/v1/files', surface, summary: 'Upload a file',
      access: developerKey('api:write'),
      input: {
        body: uploadFields,
        upload: {
          maxBytes: config.FILES_MAX_BYTES,
          store: (stream, info) => storeUpload(storage, newFileId(), stream, info.filename, config.FILES_MAX_BYTES),
          discard: (stored) => storage.delete(stored.id),
        },
      },
      handle: async (req, res, { body, file, fileWithoutName }) => {
        res.json(formatFile(await recordUpload(db, storage, developer(req), { purpose: body.purpose, file, fileWithoutName })));
      },
    }),
    route({
      method: 'get', path: '/v1/files', surface, summary: 'List files',
      access: developerKey('api:read'), input: { query: listQuery },
      handle: async (req, res, { query }) => {
        res.json(await listFiles(db, developer(req), query));
      },
    }),
    route({
      method: 'get', path: '/v1/files/:id', surface, summary: 'Retrieve a file',
      access: developerKey('api:read'),
      handle: async (req, res, { params }) => {
        res.json(formatFile(await getFile(db, developer(req), params.id)));
      },
    }),
    route({
      method: 'get', path: '/v1/files/:id/content', surface, summary: "Download a file's content",
      access: developerKey('api:read'), response: { contentType: 'application/octet-stream', description: 'The file as uploaded' },
      handle: async (req, res, { params }) => {
        const { file, content } = await openFileContent(db, storage, developer(req), params.id);
        res.setHeader('Content-Type', 'application/octet-stream');
        res.setHeader('Content-Length', String(file.bytes));
        const ascii = file.filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
        res.setHeader('Content-Disposition', `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(file.filename)}`);
        await pipeline(content, res);
      },
    }),
    route({
      method: 'delete', path: '/v1/files/:id', surface, summary: 'Delete a file',
      access: developerKey('api:write'),
      handle: async (req, res, { params }) => {
        res.json(await deleteFile(db, storage, developer(req), params.id));
      },
    }),
  ];
}
