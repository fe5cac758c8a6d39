#!/usr/bin/env bash
# Takes docs/dashboard.png, the README's picture of the dashboard: runs the demo
# (`cargo run --release --example demo`), and during its outage (3 s into the 503s, after 15 s
# of hanging requests) has headless Chromium photograph the dashboard URL it printed.
# Needs Debian's `chromium` (or CHROME=/path/to/chrome).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/dashboard.png}
cargo build --release --example demo
cargo build -p breaker-admin --example screenshot
log=$(mktemp)
target/release/examples/demo >"$log" 2>&1 &
demo=$!
trap 'kill $demo 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 600); do
    grep -q '^service on ' "$log" && break
    sleep 0.1
done
url=$(grep -o 'dashboard: http://[^ ]*' "$log" | head -1 | cut -d' ' -f2)
[ -n "$url" ] || { cat "$log"; echo "no dashboard URL in the demo's output" >&2; exit 1; }
# The demo's phases: healthy 6 s, hang 15 s, then 503s.
sleep 22
target/debug/examples/screenshot "$url" "$out" --settle 1500
wait $demo
