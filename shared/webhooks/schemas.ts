import { z } from 'zod';
import { isEventType } from '../events/types.js';
import { pageQuery } from '../pagination.js';
import { refuse, withErrorCode } from '../validation.js';
import { WEBHOOK_URL_ERRORS, type WebhookUrlErrors } from './url-guard.js';

/**
 * What /v1/webhooks reads, parsed by the route builder (spec 1, "Webhooks"): every check that
 * needs neither the network nor the endpoint's row, each failure with its spec code. Whether a
 * url's host is safe (DNS) and which status changes an endpoint allows stay in endpoints.ts.
 */
export const MAX_ROTATION_GRACE_MINUTES = 10_080;
const MAX_DESCRIPTION_LENGTH = 512;
const MAX_WEBHOOK_URL_LENGTH = 2_048;

/**
 * The two registration forms. POST /v1/webhooks answers each URL problem with its own code;
 * POST /v1/webhook_endpoints documents a single invalid_url for all of them.
 */
export type RegistrationForm = 'webhooks' | 'webhook_endpoints';
export const URL_ERRORS: Record<RegistrationForm, WebhookUrlErrors> = {
  webhooks: WEBHOOK_URL_ERRORS,
  webhook_endpoints: { missing: 'invalid_url', insecure: 'invalid_url', malformed: 'invalid_url' },
};

/**
 * An https URL without credentials, normalized (lower-case host, default port and fragment
 * dropped). Missing or not a string is `errors.missing`; its other failures each have their code.
 */
function webhookUrl(errors: WebhookUrlErrors) {
  const url = z
    .string()
    .transform((value, ctx) => {
      if (value.trim() === '') return refuse(ctx, errors.missing);
      if (value.length > MAX_WEBHOOK_URL_LENGTH) return refuse(ctx, errors.malformed, `url is longer than ${MAX_WEBHOOK_URL_LENGTH} characters.`);
      let url: URL;
      try {
        url = new URL(value.trim());
      } catch {
        return refuse(ctx, errors.malformed, 'url is not a valid absolute URL.');
      }
      if (url.protocol !== 'https:') return refuse(ctx, errors.insecure);
      if (url.username || url.password) return refuse(ctx, errors.malformed, 'url must not carry credentials.');
      if (!url.hostname) return refuse(ctx, errors.malformed, 'url has no host.');
      url.hash = '';
      return url.href;
    })
    .describe('An https URL that accepts POST requests.');
  return withErrorCode(url, errors.missing);
}

/**
 * A non-empty list of registered types (reserved ones included), duplicates dropped. Absent, null
 * or empty is empty_events, anything but an array of strings invalid_request, a type not
 * registered unknown_event_type: three codes for one field, so it is read by hand and documented
 * as the array it is.
 */
const events = z
  .unknown()
  .transform((value, ctx) => {
    if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) return refuse(ctx, 'empty_events');
    if (!Array.isArray(value) || value.some((type) => typeof type !== 'string')) return refuse(ctx, 'invalid_request', 'events must be an array of event type names.');
    const types = value as string[];
    const unknown = types.find((type) => !isEventType(type));
    if (unknown !== undefined) return refuse(ctx, 'unknown_event_type', `${JSON.stringify(unknown.slice(0, 100))} is not a registered event type.`);
    return [...new Set(types)];
  })
  .meta({ type: 'array', items: { type: 'string' }, minItems: 1, description: 'Event types to deliver (see docs/webhooks.md).' });

const descriptionRule = `must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters`;
const description = z.string({ error: descriptionRule }).max(MAX_DESCRIPTION_LENGTH, { error: descriptionRule }).nullable();

const rotationGrace = withErrorCode(
  z.int32().min(0).max(MAX_ROTATION_GRACE_MINUTES).describe('Minutes the previous secret keeps verifying after a rotation (0 to 10080).'),
  'invalid_rotation_grace',
);

/**
 * The status a caller may ask for: active or paused. disabled_after_failures is the delivery
 * worker's alone to set; whether the endpoint's current status allows the change is the domain's.
 */
const status = z
  .unknown()
  .transform((value, ctx) => {
    if (value === 'active' || value === 'paused') return value;
    return refuse(
      ctx,
      'invalid_status_transition',
      value === 'disabled_after_failures' ? 'Only the delivery worker disables an endpoint; set status to paused instead.' : 'status must be active or paused.',
    );
  })
  .meta({ type: 'string', enum: ['active', 'paused'] });

const registration = (form: RegistrationForm) =>
  z.strictObject({ url: webhookUrl(URL_ERRORS[form]), events, description: description.optional(), rotation_grace_minutes: rotationGrace.optional() });

/** The bodies each route reads; unknown fields are refused. */
export const WEBHOOK_BODIES = {
  webhooks: registration('webhooks'),
  webhook_endpoints: registration('webhook_endpoints'),
  patch: z.strictObject({
    url: webhookUrl(WEBHOOK_URL_ERRORS).optional(),
    events: events.optional(),
    description: description.optional(),
    rotation_grace_minutes: rotationGrace.optional(),
    status: status.optional(),
  }),
  rotate: z.strictObject({ rotation_grace_minutes: rotationGrace.optional() }),
};

export type EndpointRegistration = z.output<typeof WEBHOOK_BODIES.webhooks>;
export type EndpointPatch = z.output<typeof WEBHOOK_BODIES.patch>;
export type SecretRotation = z.output<typeof WEBHOOK_BODIES.rotate>;

export const ENDPOINT_STATUSES = ['active', 'paused', 'disabled_after_failures'] as const;
export const DELIVERY_STATUSES = ['pending', 'retrying', 'succeeded', 'dead', 'replayed'] as const;

/** GET /v1/webhooks: a page, optionally of one status. */
export const endpointListQuery = pageQuery.extend({
  status: z.enum(ENDPOINT_STATUSES, { error: `must be one of ${ENDPOINT_STATUSES.join(', ')}` }).optional(),
});

/** GET /v1/webhooks/:id/deliveries: a page, newest first, optionally of one status. */
export const deliveryListQuery = pageQuery.extend({
  status: z.enum(DELIVERY_STATUSES, { error: `must be one of ${DELIVERY_STATUSES.join(', ')}` }).optional(),
});

export type EndpointListQuery = z.output<typeof endpointListQuery>;
export type DeliveryListQuery = z.output<typeof deliveryListQuery>;
