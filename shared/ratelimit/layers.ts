import { hash } from 'node:crypto';
import type { Config } from '../config.js';
import type { LimitLayer } from './limiter.js';

/**
 * The platform's rate-limit layers. Every request runs the layers that apply to it in one
 * atomic check; the lowest applicable ceiling wins because any full layer refuses.
 */
type Limits = Pick<Config, 'EDGE_RPM_LIMIT' | 'DEVELOPER_RPM_LIMIT' | 'DEVELOPER_TPM_LIMIT'>;

/** Edge: per client IP plus credential, so one noisy address cannot starve a key used elsewhere. */
export function edgeLayer(config: Limits, ip: string, credential: string): LimitLayer {
  const fingerprint = hash('sha256', credential, 'hex').slice(0, 24);
  return { key: `edge:${ip}:${fingerprint}`, limit: config.EDGE_RPM_LIMIT, cost: 1, code: 'edge_rate_limit_exceeded', countsRequests: true };
}

/** Developer: requests and tokens per minute across all of the account's keys and customers. */
export function developerLayers(config: Limits, accountId: string): LimitLayer[] {
  return [
    { key: `developer:${accountId}:rpm`, limit: config.DEVELOPER_RPM_LIMIT, cost: 1, code: 'developer_rate_limit_exceeded', countsRequests: true },
    { key: developerTokensKey(accountId), limit: config.DEVELOPER_TPM_LIMIT, cost: 0, code: 'developer_rate_limit_exceeded', countsRequests: false },
  ];
}

export const developerTokensKey = (accountId: string) => `developer:${accountId}:tpm`;

/** Customer: its own rpm and tpm when set; a customer without limits adds no layer. */
export function customerLayers(customer: { id: string; rpm_limit: number | null; tpm_limit: number | null }): LimitLayer[] {
  const layers: LimitLayer[] = [];
  if (customer.rpm_limit !== null) {
    layers.push({ key: `customer:${customer.id}:rpm`, limit: customer.rpm_limit, cost: 1, code: 'customer_rate_limit_exceeded', countsRequests: true });
  }
  if (customer.tpm_limit !== null) {
    layers.push({ key: customerTokensKey(customer.id), limit: customer.tpm_limit, cost: 0, code: 'customer_rate_limit_exceeded', countsRequests: false });
  }
  return layers;
}

export const customerTokensKey = (customerId: string) => `customer:${customerId}:tpm`;

/** Client token: its own requests per minute, a layer above the customer's. */
export function clientTokenLayer(jti: string, rpmLimit: number): LimitLayer {
  return { key: `client_token:${jti}:rpm`, limit: rpmLimit, cost: 1, code: 'client_token_rate_limit_exceeded', countsRequests: true };
}

/** Provisioning: calls per minute on one rsk_ key. */
export function provisioningLayer(limit: number, keyId: string): LimitLayer {
  return { key: `provisioning:${keyId}:rpm`, limit, cost: 1, code: 'rate_limited', countsRequests: true };
}
