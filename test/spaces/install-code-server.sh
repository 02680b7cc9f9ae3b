#!/usr/bin/env bash
# Installs code-server, the open-source VS Code server that Code Editor
# spaces run (docs/spaces.md), from the npm registry when it is missing:
# pinned, into /usr/local/lib/code-server-$version (a cache outside the
# repository, keyed by version), linked as /usr/local/bin/code-server.
#
# code-server 4.100.3 is the last release for Node.js 20, the Node.js these
# machines have. Its native modules build with Debian's g++, make,
# pkg-config and libkrb5-dev (about 3 minutes). VS Code's ripgrep, which
# its install would download from GitHub, is Debian's ripgrep, put where
# that download is cached. Safe to re-run.
set -euo pipefail
version=4.100.3
# What code-server $version's VS Code pins (lib/vscode/npm-shrinkwrap.json,
# @vscode/ripgrep's lib/postinstall.js).
ripgrep_package=1.15.11
ripgrep_release=v13.0.0-10
prefix=/usr/local/lib/code-server-$version
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo

if [ -x "$prefix/node_modules/.bin/code-server" ]; then
  [ "$(readlink /usr/local/bin/code-server 2>/dev/null)" = "$prefix/node_modules/.bin/code-server" ] ||
    $SUDO ln -sfn "$prefix/node_modules/.bin/code-server" /usr/local/bin/code-server
  exit 0
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" = 20 ] || { echo "code-server $version needs Node.js 20, found $(node --version)" >&2; exit 1; }
case "$(uname -m)" in
  x86_64) target=x86_64-unknown-linux-musl ;;
  aarch64) target=aarch64-unknown-linux-musl ;;
  *) echo "no ripgrep target for $(uname -m)" >&2; exit 1 ;;
esac

need=()
for p in g++ make pkg-config ripgrep libkrb5-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "installing code-server $version into $prefix"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; $SUDO rm -rf "$prefix.partial"' EXIT
mkdir -p "$tmp/vscode-ripgrep-cache-$ripgrep_package"
tar czf "$tmp/vscode-ripgrep-cache-$ripgrep_package/ripgrep-$ripgrep_release-$target.tar.gz" -C /usr/bin rg
$SUDO rm -rf "$prefix.partial"
$SUDO mkdir -p "$prefix.partial"
$SUDO npm install --prefix "$prefix.partial" --ignore-scripts --no-audit --no-fund --loglevel=error "code-server@$version" >"$tmp/install.log" 2>&1 ||
  { tail -40 "$tmp/install.log" >&2; exit 1; }
# The install scripts: code-server's postinstall installs VS Code's own
# modules (node-pty, kerberos… built here); npm_config_yes lets node-pty's
# npx run node-gyp; root needs unsafe-perm.
(cd "$prefix.partial" && $SUDO env TMPDIR="$tmp" npm_config_yes=true npm rebuild --unsafe-perm --no-audit --no-fund --loglevel=error) \
  >"$tmp/build.log" 2>&1 || { grep -v '^npm warn' "$tmp/build.log" | tail -60 >&2; exit 1; }
$SUDO mv "$prefix.partial" "$prefix"
$SUDO ln -sfn "$prefix/node_modules/.bin/code-server" /usr/local/bin/code-server
echo "code-server $version installed: /usr/local/bin/code-server"
