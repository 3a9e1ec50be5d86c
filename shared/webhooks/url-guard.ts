import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { serviceError } from '../errors.js';

/**
 * SSRF guard of webhook URLs. A URL must be https and its host must resolve only to public unicast
 * addresses: never loopback, private (RFC 1918), link-local (cloud metadata at 169.254.169.254),
 * carrier-grade NAT, unique-local, multicast, unspecified, reserved or an IPv4 address hidden in
 * IPv6. It is checked at registration (DNS resolved then) and again at every connection on the
 * address actually dialled (`guardedLookup`), so a name that re-resolves to a private address
 * later (DNS rebinding) is refused too. `allowPrivate` is the tests' and local development's switch.
 * (The checks that need no network, https and a well-formed URL, are the request schema's:
 * shared/webhooks/schemas.ts.)
 */

export interface WebhookUrlErrors {
  /** url missing, empty or not a string. */
  missing: 'invalid_url';
  /** Not https. */
  insecure: 'invalid_url' | 'insecure_webhook_url';
  /** Unparseable, or a private or unsafe host. */
  malformed: 'invalid_url' | 'malformed_webhook_url';
}

/** The codes of spec 1's webhook error table; the second registration form folds them into invalid_url. */
export const WEBHOOK_URL_ERRORS: WebhookUrlErrors = { missing: 'invalid_url', insecure: 'insecure_webhook_url', malformed: 'malformed_webhook_url' };

/** Whether an address is anything but public unicast. */
export function isUnsafeAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() !== 'unicast';
}

/** The host of a URL as the resolver wants it (IPv6 literals lose their brackets). */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Registration check: every address the host resolves to now must be safe. */
export async function assertSafeDestination(url: URL, allowPrivate: boolean, errors: WebhookUrlErrors = WEBHOOK_URL_ERRORS): Promise<void> {
  if (allowPrivate) return;
  const host = hostOf(url);
  if (net.isIP(host)) {
    if (isUnsafeAddress(host)) throw unsafeHost(errors);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    throw serviceError(errors.malformed, { param: 'url', message: `The host ${host} does not resolve.` });
  }
  if (addresses.length === 0 || addresses.some((entry) => isUnsafeAddress(entry.address))) throw unsafeHost(errors);
}

const unsafeHost = (errors: WebhookUrlErrors) =>
  serviceError(errors.malformed, { param: 'url', message: 'url resolves to a private, loopback, link-local or otherwise unsafe address.' });

/** Raised at connection time when the dialled address is unsafe; a delivery attempt reports it as its error. */
export class UnsafeAddressError extends Error {
  readonly code = 'EUNSAFEADDRESS';
  constructor(host: string, address: string) {
    super(`refused to connect to ${host}: it resolves to the unsafe address ${address}`);
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for an http(s) Agent: resolves as dns.lookup does, then refuses unsafe addresses, so
 * the check applies to the very address the socket connects to. (An IP-literal host never reaches
 * a lookup; the delivery client checks those itself.)
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const unsafe = allowPrivate ? undefined : addresses.find((entry) => isUnsafeAddress(entry.address));
      if (unsafe) return callback(new UnsafeAddressError(hostname, unsafe.address), []);
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}
