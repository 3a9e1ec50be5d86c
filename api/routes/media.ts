import { Router } from 'express';
import { runMeteredCall } from '../../shared/billing/metered-call.js';
import { translateUpstream, withRetries } from '../../shared/inference/chat.js';
import { planImages, planSpeech } from '../../shared/inference/media.js';
import { MAX_AUDIO_BYTES, planTranscription, renderTranscript, transcriptionCost } from '../../shared/inference/transcriptions.js';
import { readMultipart } from '../multipart.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

const CALL_DEADLINE_MS = 120_000;

/** Images, text-to-speech and transcription: metered per image, per character and per second; not for client tokens. */
export function mediaRoutes(platform: GatewayServices): Router {
  const router = Router();
  const governed = meteredCall(platform, { developer: 'api:chat', clientToken: null });

  router.post('/v1/images/generations', governed, async (req, res) => {
    const plan = await planImages(req.body, platform.providers);
    const signal = abortWhenClientLeaves(res);
    const settled = await runMeteredCall(platform, meteredCallOf(req), plan.costMicros, async () => {
      const result = await withRetries(() => plan.adapter.generateImages!({ model: plan.model, upstreamModel: plan.model.model, prompt: plan.prompt, n: plan.n, ...(plan.size && { size: plan.size }), signal }), Date.now() + CALL_DEADLINE_MS, signal);
      return { result, model: plan.model.id, costMicros: result.images.length * plan.model.inputMicrosPer1M, tokensIn: 0, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    setWalletHeaders(res, settled);
    res.json({ created: Math.floor(Date.now() / 1000), data: settled.result.images.map((image) => ({ b64_json: image.b64Json, ...(image.revisedPrompt && { revised_prompt: image.revisedPrompt }) })) });
  });

  router.post('/v1/audio/speech', governed, async (req, res) => {
    const plan = await planSpeech(req.body, platform.providers);
    const signal = abortWhenClientLeaves(res);
    const settled = await runMeteredCall(platform, meteredCallOf(req), plan.costMicros, async () => {
      const result = await withRetries(() => plan.adapter.speak!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, voice: plan.voice, format: plan.format, signal }), Date.now() + CALL_DEADLINE_MS, signal);
      return { result, model: plan.model.id, costMicros: plan.costMicros, tokensIn: 0, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    setWalletHeaders(res, settled);
    res.setHeader('content-type', settled.result.contentType);
    res.send(settled.result.audio);
  });
  router.post('/v1/audio/transcriptions', governed, async (req, res) => {
    const body = await readMultipart(req, MAX_AUDIO_BYTES);
    const plan = await planTranscription(body.fields, body.file !== undefined, platform.providers);
    const file = body.file!;
    const signal = abortWhenClientLeaves(res);
    const settled = await runMeteredCall(platform, meteredCallOf(req), plan.maxCostMicros, async () => {
      const result = await withRetries(
        () =>
          plan.adapter.transcribe!({
            model: plan.model,
            upstreamModel: plan.model.model,
            audio: file.buffer,
            filename: file.filename,
            mimeType: file.mimeType,
            ...(plan.language && { language: plan.language }),
            ...(plan.prompt && { prompt: plan.prompt }),
            signal,
          }),
        Date.now() + CALL_DEADLINE_MS,
        signal,
      );
      return { result, model: plan.model.id, costMicros: transcriptionCost(plan.model, result.durationSeconds), tokensIn: 0, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    setWalletHeaders(res, settled);
    const rendered = renderTranscript(settled.result, plan.format);
    res.setHeader('content-type', rendered.contentType);
    res.send(typeof rendered.body === 'string' ? rendered.body : JSON.stringify(rendered.body));
  });
  return router;
}
