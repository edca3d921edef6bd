#!/bin/sh
# Runs tests/binaries.rs (target facts, and with root the real gtrace on real eBPF) for
# every Go release from 1.17 to the newest, each built stripped or not, PIE or not, cgo or
# not. Toolchains come through the Go module proxy (GOTOOLCHAIN=go1.N.P) and stay in the
# module cache. Also checks that a Go 1.16 binary is refused.
#
#   tests/go-versions.sh                 # the latest patch of every minor release
#   tests/go-versions.sh go1.21.0 ...    # just these
#
# A release whose toolchain cannot be fetched is reported as SKIPPED, not passed; with
# CI=true it is a failure (the tests themselves fail then, and so does this script).
set -u
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
    versions="$*"
else
    # The newest patch of each minor release from 1.17, as the proxy lists them.
    versions=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go list -m -versions golang.org/toolchain 2>/dev/null \
        | tr ' ' '\n' | grep 'linux-amd64$' | sed 's/^v0.0.1-//; s/\.linux-amd64$//' \
        | grep -E '^go1\.[0-9]+\.[0-9]+$' \
        | awk -F. '$2 >= 17 { last[$2] = $0 } END { for (m in last) print m, last[m] }' \
        | sort -n | cut -d' ' -f2)
    if [ -z "$versions" ]; then
        versions="go1.17.13 go1.18.10 go1.19.13 go1.20.14 go1.21.13 go1.22.12 go1.23.12 go1.24.13 go1.25.14 go1.26.11 go1.27.4"
        echo "could not list releases from the proxy; using: $versions"
    fi
fi

cargo build -q -j 2 --tests || exit 1
passed="" failed="" skipped=""
for v in $versions; do
    echo "=== $v"
    log=$(mktemp)
    if GTRACE_GO_VERSIONS="$v" cargo test -q -j 2 --test binaries -- --test-threads=1 >"$log" 2>&1; then
        if grep -q "SKIP $v" "$log"; then skipped="$skipped $v"; else passed="$passed $v"; fi
    else
        failed="$failed $v"
        tail -40 "$log"
    fi
    grep -E "SKIP|test result" "$log"
    rm -f "$log"
done
echo "=== go1.16.15 (must be refused)"
out=$(GTRACE_GO_TOO_OLD=go1.16.15 cargo test -q -j 2 --test binaries go_older_than_1_17_is_refused 2>&1)
status=$?
echo "$out" | grep -E "SKIP|test result|panicked"
if [ $status -ne 0 ]; then
    echo "$out" | tail -30
    failed="$failed go1.16.15-refusal"
elif echo "$out" | grep -q "SKIP"; then
    skipped="$skipped go1.16.15-refusal"
else
    passed="$passed go1.16.15-refusal"
fi
echo
echo "passed: ${passed:- none}"
echo "skipped (toolchain not fetched):${skipped:- none}"
echo "failed: ${failed:- none}"
if [ "${CI:-}" = true ] && [ -n "$skipped" ]; then
    echo "CI=true: a toolchain that cannot be fetched is a failure:$skipped"
    exit 1
fi
[ -z "$failed" ]
