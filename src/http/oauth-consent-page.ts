import { createHash } from 'node:crypto';
import type { AuthorizationRequest } from '../services/oauth.js';

/**
 * The consent page of /oauth/authorize: plain HTML built on the server (no script), every value
 * from the request escaped. The person types an API key of their account (the service has no
 * passwords); the form carries the checked request back, and a CSRF token that must match the
 * page's cookie.
 */

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.4rem}code{background:#f2f2f2;padding:0 .25rem;word-break:break-all}
label{display:block;margin:1rem 0 .25rem;font-weight:600}input[type=password]{width:100%;padding:.5rem;font:inherit}
.actions{margin-top:1.25rem;display:flex;gap:.75rem}button{padding:.5rem 1.25rem;font:inherit;cursor:pointer}
.error{color:#a40000;font-weight:600}.note{color:#555;font-size:.9rem}`;

/** The CSP hash of the page's one inline style, so that style-src needs no 'unsafe-inline'. */
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

const escapeHtml = (value: string) =>
  value.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/**
 * The page's policy: nothing but its own inline style, no frames around it (clickjacking), and a
 * form that may go only to this origin and, by the redirect that answers it, the client's
 * redirect URI (Chromium applies form-action to the redirect too).
 */
export function consentPageSecurityPolicy(redirectUri: string | null): string {
  const formTargets = ["'self'"];
  if (redirectUri) {
    try {
      const url = new URL(redirectUri);
      formTargets.push(url.origin === 'null' ? `${url.protocol}` : url.origin);
    } catch {
      // Not a URL: the page names no target for it (it never gets this far).
    }
  }
  return [
    "default-src 'none'",
    `style-src ${STYLE_HASH}`,
    `form-action ${formTargets.join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>`;
}

export function consentPage(request: AuthorizationRequest, csrfToken: string, error: string | null = null): string {
  const name = request.client.clientName ?? 'An unnamed application';
  const redirect = new URL(request.redirectUri);
  const hidden = {
    client_id: request.client.clientId,
    redirect_uri: request.redirectUri,
    response_type: 'code',
    code_challenge: request.codeChallenge,
    code_challenge_method: 'S256',
    resource: request.resource,
    scope: request.scope,
    ...(request.state !== null && { state: request.state }),
    csrf_token: csrfToken,
  };
  const fields = Object.entries(hidden)
    .map(([field, value]) => `<input type="hidden" name="${field}" value="${escapeHtml(value)}">`)
    .join('\n');
  return page(
    'Allow access to your image generation account',
    `<h1>Allow <strong id="client-name">${escapeHtml(name)}</strong> to use your image generation account?</h1>
<p>It will act through the MCP server (<code>${escapeHtml(request.resource)}</code>) as your account: generate
images (which spends its tokens), list your tasks and media, and read your balance, until you revoke the key.</p>
<p class="note">Client: <code>${escapeHtml(request.client.clientId)}</code><br>It gets its answer at
<code>${escapeHtml(redirect.origin === 'null' ? request.redirectUri : redirect.origin + redirect.pathname)}</code>.</p>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/oauth/authorize">
${fields}
<label for="api_key">API key of your account</label>
<input id="api_key" name="api_key" type="password" autocomplete="off" spellcheck="false" placeholder="igk_…">
<p class="note">The key itself is not given to the application: it receives tokens of its own, which end
when this key is revoked.</p>
<div class="actions"><button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></div>
</form>`,
  );
}

/** A request that cannot be answered at the client's redirect URI: told to the person instead. */
export function authorizationErrorPage(error: string, description: string): string {
  return page(
    'Authorization request refused',
    `<h1>This authorization request cannot be completed</h1>
<p class="error" role="alert"><code>${escapeHtml(error)}</code>: ${escapeHtml(description)}</p>
<p>Return to the application and try again; if it keeps happening, its registration is out of date.</p>`,
  );
}
