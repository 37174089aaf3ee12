#!/usr/bin/env bash
# Renders a run directory's report.html to one PNG of the whole page with
# headless Chromium, for attaching to a ticket or checking the report by eye.
#
# usage: scripts/render-report-png.sh RUN_DIR OUT.png
#
# The report must exist (shardtrain report RUN_DIR writes it). Chromium is not
# installed by scripts/install-deps.sh (it is large and only needed here):
# without it this prints how to install it and exits 2.
#
# Chromium's --screenshot captures the window, not the page, so the page is
# rendered in a window taller than any report and the blank bottom is trimmed
# off afterwards (REPORT_PNG_HEIGHT overrides the window height).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 RUN_DIR OUT.png" >&2
  exit 2
fi
run_dir=$1
out=$2
report="$run_dir/report.html"
[ -f "$report" ] || { echo "$0: $report: no such file (run: shardtrain report $run_dir)" >&2; exit 1; }

chromium_bin=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then chromium_bin=$(command -v "$c"); break; fi
done
if [ -z "$chromium_bin" ]; then
  echo "$0: Chromium is needed to render the report: apt-get install chromium" >&2
  exit 2
fi

height=${REPORT_PNG_HEIGHT:-16000}
abs_report=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
case "$out" in /*) abs_out=$out ;; *) abs_out=$PWD/$out ;; esac
# A private profile directory: Chromium refuses to share one between instances,
# and as root it must not touch the user's.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

if ! "$chromium_bin" --headless --disable-gpu --no-sandbox --hide-scrollbars \
     --user-data-dir="$profile" --no-first-run --disable-extensions \
     --window-size="1400,$height" --screenshot="$abs_out" "file://$abs_report" \
     >"$profile/chromium.log" 2>&1; then
  cat "$profile/chromium.log" >&2
  echo "$0: chromium failed to render $report" >&2
  exit 1
fi
[ -s "$abs_out" ] || { cat "$profile/chromium.log" >&2; echo "$0: chromium wrote no $out" >&2; exit 1; }

# Trim the blank bottom: keep up to the last row that is not background, plus a margin.
/usr/bin/python3 - "$abs_out" <<'PYEOF'
import sys
from PIL import Image, ImageChops  # python3-pil, a dependency of python3-matplotlib
path = sys.argv[1]
img = Image.open(path).convert("RGB")
background = Image.new("RGB", img.size, img.getpixel((img.width - 1, img.height - 1)))
box = ImageChops.difference(img, background).getbbox()
bottom = min(img.height, (box[3] if box else img.height) + 24)
if bottom >= img.height:
    print(f"warning: the report may be taller than the {img.height}px window "
          "(set REPORT_PNG_HEIGHT)", file=sys.stderr)
img.crop((0, 0, img.width, bottom)).save(path, optimize=True)
print(f"{path}: {img.width}x{bottom}")
PYEOF
