#!/usr/bin/env bash
# Instructions per call of every row of the breaker bench, counted by callgrind (valgrind), which
# unlike times do not move with the machine's load. Builds the bench, then runs each row's calls
# alone (`BREAKER_IR=<row>,<calls>`; only the function `measured` is counted) and prints the
# count per call less the harness's (`empty`: the loop and a call through `&dyn Fn`; for an
# async row `async/empty`: the runtime's loop awaiting the bare operation).
#
#   breaker-core/benches/ir.sh [calls]          # default 100000 calls per row
#
# Note: under valgrind the operating system's clock is read by a system call, whose kernel
# instructions are not counted (for this library and its peers alike).
set -euo pipefail
cd "$(dirname "$0")/../.."
calls=${1:-100000}
bin=$(cargo bench -p breaker-core --bench breaker --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)
count() {
    BREAKER_IR="$1,$calls" valgrind --tool=callgrind --toggle-collect='*measured*' \
        --callgrind-out-file=/dev/null "$bin" 2>&1 | awk '/refs:/ { gsub(",", "", $NF); print $NF }'
}
harness=$(count empty)
async_harness=$(count async/empty)
printf '%-28s %12s\n' row "instr/call"
for row in \
    new/consecutive factory/consecutive totals/consecutive failsafe/consecutive \
    new/count_window factory/count_window recloser/count_window \
    new/time_window factory/time_window failsafe/time_window \
    open/new open/failsafe open/recloser \
    async/new/consecutive async/failsafe \
    async/new/count_window async/recloser \
    async/new/time_window async/failsafe/time_window \
    create/new/consecutive create/new/count_window create/new/time_window \
    create/failsafe create/recloser create/tower; do
    n=$(count "$row")
    h=$harness
    case "$row" in async/*) h=$async_harness ;; esac
    awk -v r="$row" -v n="$n" -v h="$h" -v c="$calls" \
        'BEGIN { printf "%-28s %12.1f\n", r, (n - h) / c }'
done
awk -v h="$harness" -v a="$async_harness" -v c="$calls" \
    'BEGIN { printf "%-28s %12.1f / %.1f\n", "(harness sync / async)", h / c, a / c }'
