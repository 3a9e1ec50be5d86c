import { lintSource } from '@secretlint/core';
import { secretLintProfiler } from '@secretlint/profiler';
import { creator as recommended } from '@secretlint/secretlint-rule-preset-recommend';

// secretlint profiles every rule on every text by default: a third of the scan's time, and marks
// that pile up without bound in the pool's long-lived threads. Nothing here reads them.
secretLintProfiler.setEnabled(false);

/**
 * Secret scanning with secretlint's recommended preset (AWS, GCP, Azure, GitHub, GitLab, npm,
 * Slack, SendGrid, Shopify, OpenAI, Anthropic, private keys, basic-auth URLs, database
 * connection strings and more), run on the CPU pool's threads. AWS access key ids are scanned
 * too (the preset leaves that rule off by default): an id alone already names an account's key.
 * Findings carry the rule and secretlint's masked message, never the secret itself.
 */
export interface SecretScanInput {
  items: { ref: string; text: string }[];
}

export interface SecretFinding {
  ref: string;
  rule: string;
  message: string;
}

const CONFIG = {
  rules: [{ id: '@secretlint/secretlint-rule-preset-recommend', rule: recommended, rules: [{ id: '@secretlint/secretlint-rule-aws', options: { enableIDScanRule: true } }] }],
};

/** The first finding of each item that holds a secret, in item order. */
export async function scanSecrets({ items }: SecretScanInput): Promise<SecretFinding[]> {
  const findings: SecretFinding[] = [];
  for (const item of items) {
    if (item.text.length === 0) continue;
    const result = await lintSource({ source: { filePath: item.ref, content: item.text, contentType: 'text' }, options: { config: CONFIG as never, maskSecrets: true } });
    const first = result.messages[0];
    if (first) findings.push({ ref: item.ref, rule: first.ruleId.replace('@secretlint/secretlint-rule-', ''), message: first.message });
  }
  return findings;
}
