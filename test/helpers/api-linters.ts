import { createConfig, lintFromString } from '@redocly/openapi-core';
import spectralCore from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';
import owasp from '@stoplight/spectral-owasp-ruleset';

/** One finding of a linter, reduced to what a test asserts and a person reads. */
export interface LintFinding {
  rule: string;
  severity: 'error' | 'warning' | 'info' | 'hint';
  path: string;
  message: string;
}

/** Redocly's `recommended` ruleset over the document's text. */
export async function lintWithRedocly(yamlText: string): Promise<LintFinding[]> {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lintFromString({ source: yamlText, absoluteRef: 'openapi.yaml', config });
  return problems.map((p) => ({
    rule: p.ruleId,
    severity: p.severity === 'error' ? 'error' : 'warning',
    path: p.location[0]?.pointer ?? '',
    message: p.message,
  }));
}

const SPECTRAL_SEVERITIES = ['error', 'warning', 'info', 'hint'] as const;

/** Spectral's `spectral:oas` plus the OWASP API Security ruleset, as `extends: [oas, owasp]` would run them. */
export async function lintWithSpectral(yamlText: string): Promise<LintFinding[]> {
  const spectral = new spectralCore.Spectral();
  spectral.setRuleset({
    extends: [
      [oas as never, 'recommended'],
      [owasp as never, 'recommended'],
    ],
  } as never);
  const document = new spectralCore.Document(yamlText, spectralParsers.Yaml, 'openapi.yaml');
  const results = await spectral.run(document);
  return results.map((r) => ({
    rule: String(r.code),
    severity: SPECTRAL_SEVERITIES[r.severity],
    path: r.path.join('.'),
    message: r.message,
  }));
}
