import { Router } from 'express';
import { generateImages, planImages, planSpeech, speak } from '../../shared/inference/media.js';
import { MAX_AUDIO_BYTES, planTranscription, transcribe } from '../../shared/inference/transcriptions.js';
import { readMultipart } from '../multipart.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

/** Images, text-to-speech and transcription: metered per image, per character and per second; not for client tokens. */
export function mediaRoutes(platform: GatewayServices): Router {
  const router = Router();
  const governed = meteredCall(platform, { developer: 'api:chat', clientToken: null });

  router.post('/v1/images/generations', governed, async (req, res) => {
    const plan = await planImages(req.body, platform.providers);
    const generated = await generateImages(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
    setWalletHeaders(res, generated);
    res.json(generated.body);
  });

  router.post('/v1/audio/speech', governed, async (req, res) => {
    const plan = await planSpeech(req.body, platform.providers);
    const spoken = await speak(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
    setWalletHeaders(res, spoken);
    res.setHeader('content-type', spoken.contentType);
    res.send(spoken.audio);
  });

  router.post('/v1/audio/transcriptions', governed, async (req, res) => {
    const body = await readMultipart(req, MAX_AUDIO_BYTES);
    const plan = await planTranscription(body.fields, body.file !== undefined, platform.providers);
    const transcript = await transcribe(platform, meteredCallOf(req), plan, body.file!, abortWhenClientLeaves(res));
    setWalletHeaders(res, transcript);
    res.setHeader('content-type', transcript.contentType);
    res.send(typeof transcript.body === 'string' ? transcript.body : JSON.stringify(transcript.body));
  });
  return router;
}
