/** Developer-key scopes of spec 1. `admin` satisfies every required scope. */
export const DEVELOPER_SCOPES = ['api:chat', 'api:read', 'api:write', 'api:webhooks', 'api:client_tokens', 'admin'] as const;

export type DeveloperScope = (typeof DEVELOPER_SCOPES)[number];

export function isDeveloperScope(value: string): value is DeveloperScope {
  return (DEVELOPER_SCOPES as readonly string[]).includes(value);
}

export function grantsScope(granted: readonly string[], required: DeveloperScope): boolean {
  return granted.includes(required) || granted.includes('admin');
}
