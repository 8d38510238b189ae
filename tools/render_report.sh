#!/usr/bin/env bash
# Render a censusdp HTML report in headless Chromium and check that its plots load.
#
#   tools/render_report.sh REPORT.html [SCREENSHOT.png]
#
# Installs Debian's chromium package if no Chromium is found (needs root and network
# to the Debian mirrors). Prints "images loaded: N/M" and exits non-zero unless every
# <img> in the report decoded (naturalWidth > 0) and the page has at least one image.
set -euo pipefail

report="${1:?usage: tools/render_report.sh REPORT.html [SCREENSHOT.png]}"
shot="${2:-${report%.html}.png}"
[ -f "$report" ] || { echo "no such file: $report" >&2; exit 2; }

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser="$(command -v "$b")"; break; fi
done
if [ -z "$browser" ]; then
  echo "Chromium not found; installing Debian's chromium package" >&2
  if [ "$(id -u)" -ne 0 ]; then echo "need root to apt-get install chromium" >&2; exit 3; fi
  apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }
  browser="$(command -v chromium)"
fi

url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --allow-file-access-from-files
       --virtual-time-budget=10000 --user-data-dir="$(mktemp -d)")
# The report's inline script records how many images decoded on the <body> element.
dom="$("$browser" "${flags[@]}" --dump-dom "$url" 2>/dev/null)"
"$browser" "${flags[@]}" --window-size=1200,3000 --screenshot="$shot" "$url" >/dev/null 2>&1
total="$(printf '%s' "$dom" | grep -o 'data-images-total="[0-9]*"' | grep -o '[0-9]*' || true)"
loaded="$(printf '%s' "$dom" | grep -o 'data-images-loaded="[0-9]*"' | grep -o '[0-9]*' || true)"
echo "images loaded: ${loaded:-?}/${total:-?}; screenshot: $shot"
[ -n "$total" ] && [ "$total" -gt 0 ] && [ "$loaded" = "$total" ] && [ -s "$shot" ]
