import express, { type Express, type Router } from 'express';
import { FaultRegistry, type EmulatorOptions, type FaultRule } from './core.js';

/**
 * The emulator's HTTP server: each provider lives under `/<provider>` with its real path layout
 * below (e.g. `/openai/v1/chat/completions`, `/anthropic/v1/messages`), so a provider's base URL
 * setting is all the gateway changes. `/_emulator/faults` lets tests inject failures.
 */
export interface EmulatorStyle {
  /** Mounts this style's providers on the app; returns the provider names it serves. */
  mount(app: Express, context: { faults: FaultRegistry; options: EmulatorOptions }): string[];
}

export function createEmulatorApp(options: EmulatorOptions, styles: EmulatorStyle[]): { app: Express; faults: FaultRegistry; providers: string[] } {
  const app = express();
  app.disable('x-powered-by');
  const faults = new FaultRegistry();

  const control: Router = express.Router();
  control.use(express.json());
  control.post('/faults', (req, res) => {
    const rules = (Array.isArray(req.body) ? req.body : [req.body]) as FaultRule[];
    for (const rule of rules) faults.add({ ...rule, times: rule.times ?? 1 });
    res.status(204).end();
  });
  control.get('/abandoned_streams', (_req, res) => {
    res.json({ data: faults.abandonedStreams });
  });
  control.delete('/faults', (_req, res) => {
    faults.clear();
    res.status(204).end();
  });
  app.use('/_emulator', control);

  const providers = styles.flatMap((style) => style.mount(app, { faults, options }));
  control.get('/providers', (_req, res) => {
    res.json({ providers });
  });
  return { app, faults, providers };
}
