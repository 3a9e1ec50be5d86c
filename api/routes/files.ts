import { pipeline } from 'node:stream/promises';
import { Router, type Request } from 'express';
import { deleteFile, formatFile, getFile, listFiles, newFileId, openFileContent, parsePurpose, recordUpload, storeUpload } from '../../shared/files/files.js';
import { fileStorageFor } from '../../shared/files/storage.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { principalOf, requireDeveloperKey } from '../middleware/authenticate.js';
import { readMultipartStreaming } from '../multipart.js';

/** Files: multipart uploads streamed to storage (developer keys only), listed, downloaded, deleted. */
export function fileRoutes(platform: GatewayServices): Router {
  const { db, config } = platform;
  const storage = fileStorageFor(config);
  const router = Router();
  const developer = (req: Request) => principalOf(req).accountId;

  router.post('/v1/files', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    const id = newFileId();
    const upload = await readMultipartStreaming(
      req,
      {
        maxFileBytes: config.FILES_MAX_BYTES,
        // A bad purpose sent before the file refuses the upload before its bytes are read.
        checkField: (name, value) => {
          if (name === 'purpose') parsePurpose(value);
        },
        storeFile: (stream, info) => storeUpload(storage, id, stream, info.filename, config.FILES_MAX_BYTES),
      },
      (stored) => storage.delete(stored.id),
    );
    res.json(formatFile(await recordUpload(db, storage, developer(req), upload)));
  });

  router.get('/v1/files', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(await listFiles(db, developer(req), req.query));
  });

  router.get('/v1/files/:id', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    res.json(formatFile(await getFile(db, developer(req), String(req.params.id))));
  });

  router.get('/v1/files/:id/content', requireDeveloperKey(platform, 'api:read'), async (req, res) => {
    const { file, content } = await openFileContent(db, storage, developer(req), String(req.params.id));
    res.setHeader('Content-Type', 'application/octet-stream');
    res.setHeader('Content-Length', String(file.bytes));
    const ascii = file.filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
    res.setHeader('Content-Disposition', `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(file.filename)}`);
    await pipeline(content, res);
  });

  router.delete('/v1/files/:id', requireDeveloperKey(platform, 'api:write'), async (req, res) => {
    res.json(await deleteFile(db, storage, developer(req), String(req.params.id)));
  });

  return router;
}
