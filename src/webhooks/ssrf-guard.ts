import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import ipaddr from 'ipaddr.js';

export type LookupAll = (hostname: string) => Promise<{ address: string; family: 4 | 6 }[]>;

export interface WebhookUrlPolicy {
  /** Allows http and private/loopback targets (tests, local development). */
  allowPrivate: boolean;
  lookup?: LookupAll;
  /** Ports a webhook may be sent to (WEBHOOK_ALLOWED_PORTS); default DEFAULT_WEBHOOK_PORTS. */
  allowedPorts?: PortRanges;
}

/** Inclusive port ranges. */
export type PortRanges = readonly (readonly [number, number])[];

/** Ports 80 and 443, and none of the well-known ports of other services (ssh, smtp, databases…). */
export const DEFAULT_WEBHOOK_PORTS = '80,443,1024-65535';

/** "80,443,1024-65535" as ranges; throws on anything else (a port is 1 to 65535). */
export function parsePortRanges(spec: string): PortRanges {
  return spec.split(',').map((part) => {
    const match = /^\s*(\d{1,5})(?:\s*-\s*(\d{1,5}))?\s*$/.exec(part);
    const from = Number(match?.[1]);
    const to = match?.[2] === undefined ? from : Number(match[2]);
    if (!match || from < 1 || to > 65535 || from > to)
      throw new RangeError(
        `WEBHOOK_ALLOWED_PORTS: ${JSON.stringify(part.trim())} is not a port (1-65535) or a range of ports (low-high)`,
      );
    return [from, to] as const;
  });
}

const DEFAULT_PORT_RANGES = parsePortRanges(DEFAULT_WEBHOOK_PORTS);

export type WebhookUrlRejectionReason =
  | 'invalid_url'
  | 'too_long'
  | 'scheme'
  | 'userinfo'
  | 'forbidden_character'
  | 'non_canonical'
  | 'port'
  | 'empty_host'
  | 'reserved_name'
  | 'non_public_address'
  | 'resolves_to_non_public_address'
  | 'unresolvable';

export class WebhookUrlRejectedError extends Error {
  constructor(
    readonly reason: WebhookUrlRejectionReason,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookUrlRejectedError';
  }
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;

// Names that never resolve to a public receiver, refused without asking DNS.
const RESERVED_NAME_SUFFIXES = ['localhost', 'local', 'internal', 'home.arpa'];

// ipaddr.js labels all unallocated IPv6 space 'unicast' (e.g. the IPv4-compatible ::7f00:1);
// only 2000::/3 is routable global unicast.
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

export const lookupAllAddresses: LookupAll = async (hostname) => {
  const addresses = await dns.lookup(hostname, { all: true, verbatim: true });
  return addresses.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
};

/**
 * True only for addresses a webhook may reach. NAT64 (64:ff9b::/96), 6to4 and Teredo are
 * refused whatever IPv4 address they embed: they are not 'unicast' to ipaddr.js, and the
 * connect-time agent refuses them too, so accepting them would only store a URL that always fails.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  // process() turns IPv4-mapped IPv6 (::ffff:127.0.0.1) into the IPv4 address it reaches.
  const parsed = ipaddr.process(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || parsed.match(IPV6_GLOBAL_UNICAST);
}

/**
 * The one reading of a webhook URL (docs/design.md §3.6): WHATWG `URL`, and only what it reads as written.
 * Whitespace, control characters and backslashes (which WHATWG drops or turns into slashes while
 * other parsers do not), userinfo, a missing "//", and a host or port WHATWG had to rewrite
 * (`https:8.8.8.8`, `https:///x`, `127.1`, `0x7f.1`, `%6c…`, `:0443`) are refused, so that the
 * host checked is the one every reader of the stored `href` connects to. Throws
 * WebhookUrlRejectedError.
 */
export function parseWebhookUrl(rawUrl: string, policy: WebhookUrlPolicy): URL {
  if (rawUrl.length > MAX_WEBHOOK_URL_LENGTH) {
    throw new WebhookUrlRejectedError('too_long', `webhook_url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  }
  if (/[\s\p{Cc}\\]/u.test(rawUrl)) {
    throw new WebhookUrlRejectedError(
      'forbidden_character',
      'webhook_url must not contain whitespace, control characters or backslashes',
    );
  }
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new WebhookUrlRejectedError('invalid_url', 'webhook_url must be an absolute URL');
  }
  const allowedProtocols = policy.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!allowedProtocols.includes(url.protocol)) {
    throw new WebhookUrlRejectedError(
      'scheme',
      `webhook_url must use ${policy.allowPrivate ? 'http or https' : 'https'}`,
    );
  }
  if (url.username !== '' || url.password !== '' || rawUrl.slice(0, rawUrl.search(/[/?#]|$/)).includes('@')) {
    throw new WebhookUrlRejectedError('userinfo', 'webhook_url must not contain credentials');
  }
  if (url.hostname === '') {
    throw new WebhookUrlRejectedError('empty_host', 'webhook_url must have a host');
  }
  const written = writtenAuthority(rawUrl, url.protocol);
  const writtenHost = written?.host.toLowerCase();
  const sameHost =
    writtenHost !== undefined &&
    (writtenHost === url.hostname || (/\P{ASCII}/u.test(writtenHost) && domainToASCII(writtenHost) === url.hostname));
  if (!written || !sameHost || (written.port !== null && !/^(0|[1-9]\d*)$/.test(written.port))) {
    throw new WebhookUrlRejectedError(
      'non_canonical',
      `webhook_url must be written as ${url.protocol}//host[:port]/path, its host as it is (here: ${url.host})`,
    );
  }
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (!(policy.allowedPorts ?? DEFAULT_PORT_RANGES).some(([from, to]) => port >= from && port <= to)) {
    throw new WebhookUrlRejectedError('port', `webhook_url must not use port ${port}`);
  }
  return url;
}

/** The host and port as written after "scheme://", or null when the URL does not start so. */
function writtenAuthority(rawUrl: string, protocol: string): { host: string; port: string | null } | null {
  if (rawUrl.slice(0, protocol.length + 2).toLowerCase() !== `${protocol}//`) return null;
  const rest = rawUrl.slice(protocol.length + 2);
  const authority = rest.slice(0, rest.search(/[/?#]|$/));
  const match = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(authority);
  return match ? { host: match[1], port: match[2] ?? null } : null;
}

/**
 * Reads the URL (parseWebhookUrl) and refuses a host that is not public (unless the policy allows
 * private targets). Throws WebhookUrlRejectedError; used at task create (the HTTP layer maps it to
 * 400 with pointer /webhook_url). The returned URL's `href` is what is stored and sent.
 */
export async function assertWebhookUrlAllowed(rawUrl: string, policy: WebhookUrlPolicy): Promise<URL> {
  const url = parseWebhookUrl(rawUrl, policy);
  // WHATWG parsing has already normalised decimal/octal/hex IPv4 forms and percent-encoding.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (host === '') {
    throw new WebhookUrlRejectedError('empty_host', 'webhook_url must have a host');
  }
  if (policy.allowPrivate) return url;

  if (isIP(host) !== 0) {
    if (!isPublicAddress(host)) {
      throw new WebhookUrlRejectedError('non_public_address', 'webhook_url must not point to a non-public address');
    }
    return url;
  }
  if (RESERVED_NAME_SUFFIXES.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))) {
    throw new WebhookUrlRejectedError('reserved_name', 'webhook_url must not use a local or internal host name');
  }
  const addresses = await (policy.lookup ?? lookupAllAddresses)(host).catch(() => []);
  if (addresses.length === 0) {
    throw new WebhookUrlRejectedError('unresolvable', 'webhook_url host name does not resolve');
  }
  // Every address counts: the connection may use any of them.
  if (!addresses.every(({ address }) => isPublicAddress(address))) {
    throw new WebhookUrlRejectedError(
      'resolves_to_non_public_address',
      'webhook_url host name resolves to a non-public address',
    );
  }
  return url;
}
