import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

export type LookupAll = (hostname: string) => Promise<{ address: string; family: 4 | 6 }[]>;

export interface WebhookUrlPolicy {
  /** Allows http and private/loopback targets (tests, local development). */
  allowPrivate: boolean;
  lookup?: LookupAll;
}

export type WebhookUrlRejectionReason =
  | 'invalid_url'
  | 'too_long'
  | 'scheme'
  | 'userinfo'
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

/** Throws WebhookUrlRejectedError; used at task create (the HTTP layer maps it to 400 with pointer /webhook_url). */
export async function assertWebhookUrlAllowed(rawUrl: string, policy: WebhookUrlPolicy): Promise<URL> {
  if (rawUrl.length > MAX_WEBHOOK_URL_LENGTH) {
    throw new WebhookUrlRejectedError('too_long', `webhook_url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
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
  if (url.username !== '' || url.password !== '') {
    throw new WebhookUrlRejectedError('userinfo', 'webhook_url must not contain credentials');
  }
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
