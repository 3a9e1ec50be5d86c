import { z } from 'zod';
import { instant } from '../validation.js';

/** Request bodies of the machine routes (docs/hive.md, "Machines and the relay"). Unknown fields are refused. */
const email = z.string().trim().toLowerCase().pipe(z.email()).refine((value) => value.length <= 254, 'at most 254 characters');
/** The password enrolment checks is the one POST /v1/password set; its length rules are checked there, not here. */
const password = z.string().min(1).max(200);
const pem = (label: string) =>
  z
    .string()
    .max(16_384)
    .refine((value) => value.includes(`-----BEGIN ${label}-----`), `a PEM ${label}`);
const csr = pem('CERTIFICATE REQUEST');
const machineName = z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'lowercase letters, digits, ".", "_" and "-", at most 63, starting with a letter or digit');
const requestId = z.string().regex(/^enr_[0-9A-Za-z]{24}$/, 'an enrolment request id (enr_…)');

export const enrolBody = z.strictObject({ email, password, csr, name: machineName.optional() });
export const enrolRequestBody = z.strictObject({ email, csr, name: machineName.optional() });
export const enrolClaimBody = z.strictObject({ request_id: requestId, claim_secret: z.string().min(1).max(200) });
export const enrolApproveBody = z.strictObject({ request_id: requestId, name: machineName.optional() });
export const machineRenewBody = z.strictObject({
  certificate: pem('CERTIFICATE'),
  csr,
  signed_at: instant(),
  signature: z.string().min(1).max(2_048),
});
/** A machine by its id (`mch_…`) or its name. */
export const machineRevokeBody = z.strictObject({ machine: z.string().trim().min(1).max(100) });
