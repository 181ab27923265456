// Not in the PostgreSQL pass: the webhook URL guard's address rules, no store.
import t from 'tap';
import {
  assertWebhookUrlAllowed,
  isPublicAddress,
  parsePortRanges,
  WebhookUrlRejectedError,
  type LookupAll,
  type WebhookUrlRejectionReason,
} from '../../src/webhooks/ssrf-guard.js';

// Stub DNS: test names map to fixed addresses; nothing is ever resolved or connected for real.
const STUB_DNS: Record<string, { address: string; family: 4 | 6 }[]> = {
  'hooks.example.test': [{ address: '93.184.216.34', family: 4 }],
  'private.example.test': [{ address: '10.1.2.3', family: 4 }],
  'mixed.example.test': [
    { address: '93.184.216.34', family: 4 },
    { address: '10.1.2.3', family: 4 },
  ],
  'ula.example.test': [{ address: 'fd00::1', family: 6 }],
  'mapped.example.test': [{ address: '::ffff:127.0.0.1', family: 6 }],
  'public-v6.example.test': [{ address: '2606:4700::1', family: 6 }],
};

/** The reason of the WebhookUrlRejectedError the promise rejects with; fails on anything else. */
async function rejectionReason(promise: Promise<URL>): Promise<string | undefined> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return error instanceof WebhookUrlRejectedError ? error.reason : undefined;
}

function stubLookup() {
  const calls: string[] = [];
  const lookup: LookupAll = async (hostname) => {
    calls.push(hostname);
    const addresses = STUB_DNS[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses;
  };
  return { lookup, calls };
}

// [url, reason, name the stub lookup must be asked for (undefined: refused without lookup)]
const REFUSED: [string, WebhookUrlRejectionReason, string?][] = [
  ['http://hooks.example.test/', 'scheme'],
  ['file:///etc/passwd', 'scheme'],
  ['gopher://x', 'scheme'],
  ['ftp://x', 'scheme'],
  ['javascript:alert(1)', 'scheme'],
  ['https://user:pass@example.test/', 'userinfo'],
  ['https://example.test@127.0.0.1/', 'userinfo'],
  // Decision 0018: forms on which WHATWG and other parsers disagree, or that WHATWG rewrites.
  ['https://8.8.8.8\\@127.0.0.1/', 'forbidden_character'],
  [' https://8.8.8.8/', 'forbidden_character'],
  ['https://8.8.8.8/ ', 'forbidden_character'],
  ['https://8.8.8.8/\thook', 'forbidden_character'],
  ['https:8.8.8.8', 'non_canonical'],
  ['https:///8.8.8.8', 'non_canonical'],
  ['https:/8.8.8.8/', 'non_canonical'],
  ['https://134744072/', 'non_canonical'],
  ['https://8.8.8.8:08443/', 'non_canonical'],
  ['https://8.8.8.8:/', 'non_canonical'],
  ['https://8.8.8.8:22/', 'port'],
  ['https://8.8.8.8:0/', 'port'],
  ['https://8.8.8.8:1023/', 'port'],
  ['not a url', 'forbidden_character'],
  ['not-a-url', 'invalid_url'],
  ['/relative/path', 'invalid_url'],
  [`https://hooks.example.test/${'a'.repeat(2048)}`, 'too_long'],
  ['https://127.0.0.1/', 'non_public_address'],
  ['https://2130706433/', 'non_canonical'],
  ['https://0177.0.0.1/', 'non_canonical'],
  ['https://0x7f.0.0.1/', 'non_canonical'],
  ['https://0x7f000001/', 'non_canonical'],
  ['https://0x7f.1/', 'non_canonical'],
  ['https://127.1/', 'non_canonical'],
  ['https://[::1]/', 'non_public_address'],
  ['https://[::ffff:127.0.0.1]/', 'non_canonical'],
  ['https://[::ffff:7f00:1]/', 'non_public_address'],
  ['https://[::ffff:a9fe:a9fe]/', 'non_public_address'],
  ['https://[::7f00:1]/', 'non_public_address'],
  ['https://0.0.0.0/', 'non_public_address'],
  ['https://[::]/', 'non_public_address'],
  ['https://10.0.0.1/', 'non_public_address'],
  ['https://172.16.0.1/', 'non_public_address'],
  ['https://172.31.255.255/', 'non_public_address'],
  ['https://192.168.1.1/', 'non_public_address'],
  ['https://169.254.169.254/', 'non_public_address'],
  ['https://100.64.0.1/', 'non_public_address'],
  ['https://224.0.0.1/', 'non_public_address'],
  ['https://255.255.255.255/', 'non_public_address'],
  ['https://192.0.2.1/', 'non_public_address'],
  ['https://198.18.0.1/', 'non_public_address'],
  ['https://[fe80::1]/', 'non_public_address'],
  ['https://[fc00::1]/', 'non_public_address'],
  ['https://[fec0::1]/', 'non_public_address'],
  ['https://[2001:db8::1]/', 'non_public_address'],
  ['https://[64:ff9b::a00:1]/', 'non_public_address'],
  ['https://[2002:a00:1::]/', 'non_public_address'],
  ['https://[2001:0:a00:1::]/', 'non_public_address'],
  ['https://localhost/', 'reserved_name'],
  ['https://LOCALHOST./', 'reserved_name'],
  ['https://%6c%6fcalhost/', 'non_canonical'],
  ['https://foo.localhost/', 'reserved_name'],
  ['https://metadata.internal/', 'reserved_name'],
  ['https://printer.local/', 'reserved_name'],
  ['https://private.example.test/', 'resolves_to_non_public_address', 'private.example.test'],
  ['https://mixed.example.test/', 'resolves_to_non_public_address', 'mixed.example.test'],
  ['https://ula.example.test/', 'resolves_to_non_public_address', 'ula.example.test'],
  ['https://mapped.example.test/', 'resolves_to_non_public_address', 'mapped.example.test'],
  ['https://unknown.example.test/', 'unresolvable', 'unknown.example.test'],
];

for (const [url, reason, lookedUp] of REFUSED) {
  t.test(`refuses ${url.slice(0, 60)} (${reason})`, async (t) => {
    const { lookup, calls } = stubLookup();
    t.equal(await rejectionReason(assertWebhookUrlAllowed(url, { allowPrivate: false, lookup })), reason);
    t.same(calls, lookedUp ? [lookedUp] : [], lookedUp ? 'stub lookup was asked' : 'refused without a lookup');
  });
}

t.test('accepts an https name whose every address is public', async (t) => {
  const { lookup, calls } = stubLookup();
  const url = await assertWebhookUrlAllowed('https://hooks.example.test/x', { allowPrivate: false, lookup });
  t.equal(url.href, 'https://hooks.example.test/x');
  t.same(calls, ['hooks.example.test']);
});

t.test('accepts a name resolving to public IPv6', async (t) => {
  const { lookup } = stubLookup();
  await t.resolves(assertWebhookUrlAllowed('https://public-v6.example.test/', { allowPrivate: false, lookup }));
});

t.test('accepts a public IP literal without a lookup', async (t) => {
  const { lookup, calls } = stubLookup();
  await t.resolves(assertWebhookUrlAllowed('https://93.184.216.34:8443/hook', { allowPrivate: false, lookup }));
  await t.resolves(assertWebhookUrlAllowed('https://[2606:4700::1]/hook', { allowPrivate: false, lookup }));
  t.same(calls, []);
});

t.test('allowPrivate accepts http to loopback without a lookup', async (t) => {
  const { lookup, calls } = stubLookup();
  const url = await assertWebhookUrlAllowed('http://127.0.0.1:8080/', { allowPrivate: true, lookup });
  t.equal(url.port, '8080');
  await t.resolves(assertWebhookUrlAllowed('http://localhost:8080/', { allowPrivate: true, lookup }));
  t.same(calls, []);
});

t.test('the URL is read as written: default ports, case and IDN are normalised in href', async (t) => {
  const policy = { allowPrivate: false, lookup: stubLookup().lookup };
  const href = async (url: string) => (await assertWebhookUrlAllowed(url, policy)).href;
  t.equal(await href('HTTPS://93.184.216.34:443/Hook'), 'https://93.184.216.34/Hook');
  t.equal(await href('https://93.184.216.34:8443/hook'), 'https://93.184.216.34:8443/hook');
  t.equal(await href('https://[2606:4700::1]:1024/'), 'https://[2606:4700::1]:1024/');
});

t.test('WEBHOOK_ALLOWED_PORTS: only the ports listed', async (t) => {
  const policy = { allowPrivate: false, lookup: stubLookup().lookup, allowedPorts: parsePortRanges('443, 8000-8100') };
  t.equal(await rejectionReason(assertWebhookUrlAllowed('https://93.184.216.34:8443/', policy)), 'port');
  t.equal(await rejectionReason(assertWebhookUrlAllowed('https://93.184.216.34:80/', policy)), 'port');
  await t.resolves(assertWebhookUrlAllowed('https://93.184.216.34:8080/', policy));
  await t.resolves(assertWebhookUrlAllowed('https://93.184.216.34/', policy));
  for (const bad of ['0', '70000', '9-3', 'x'])
    t.throws(() => parsePortRanges(bad), { message: /WEBHOOK_ALLOWED_PORTS/ }, bad);
});

t.test('allowPrivate still refuses other schemes and credentials', async (t) => {
  const policy = { allowPrivate: true, lookup: stubLookup().lookup };
  t.equal(await rejectionReason(assertWebhookUrlAllowed('ftp://127.0.0.1/', policy)), 'scheme');
  t.equal(await rejectionReason(assertWebhookUrlAllowed('file:///etc/passwd', policy)), 'scheme');
  t.equal(await rejectionReason(assertWebhookUrlAllowed('http://user:pass@127.0.0.1/', policy)), 'userinfo');
});

t.test('isPublicAddress', async (t) => {
  for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1', '::ffff:93.184.216.34']) {
    t.ok(isPublicAddress(address), `${address} is public`);
  }
  for (const address of [
    '127.0.0.1',
    '10.0.0.1',
    '::1',
    'fe80::1%eth0',
    '64:ff9b::808:808',
    '::7f00:1',
    'not-an-ip',
    '',
  ]) {
    t.notOk(isPublicAddress(address), `${address} is not public`);
  }
});
