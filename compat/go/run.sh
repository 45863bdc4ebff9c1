#!/usr/bin/env bash
# Runs the Go SDK compatibility suite (`go test` in compat/go) against $MNEMO_BIN.
#
#   MNEMO_BIN=$PWD/target/debug/mnemo compat/go/run.sh            # everything, SQLite
#   MNEMO_BIN=$PWD/target/debug/mnemo compat/go/run.sh Memories   # tests whose name matches (go test -run)
#   MNEMO_COMPAT_DATABASE=postgres MNEMO_TEST_POSTGRES=postgres://… compat/go/run.sh
#
# Nothing goes into the source tree: the module cache, the build cache and GOPATH are folders of
# target/go (MNEMO_COMPAT_GO_DIR names another), and go.mod/go.sum are read only
# (GOFLAGS=-mod=readonly), so the pinned SDK is what runs. Ends with `N passed, M failed`.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${MNEMO_COMPAT_GO_DIR:-$repo/target/go}"
mkdir -p "$dir"
export GOMODCACHE="$dir/mod" GOCACHE="$dir/cache" GOPATH="$dir/path" GOFLAGS=-mod=readonly
if ! command -v go >/dev/null 2>&1; then
  echo "go is not installed (Go 1.26 or later; .ci/run installs it)"
  echo "0 passed, 1 failed"
  exit 1
fi
cd "$here" || exit 1
if ! go mod download >"$dir/download.log" 2>&1; then
  echo "cannot download the modules go.sum names:"
  tail -20 "$dir/download.log"
  echo "0 passed, 1 failed"
  exit 1
fi
run=()
if [ $# -gt 0 ]; then run=(-run "$1"); fi
log="$dir/last-run.log"
go test -count=1 -v -timeout 20m "${run[@]}" . 2>&1 | tee "$log" | grep -E '^(--- |ok |FAIL|PASS$|# |panic:|\s+\S+_test\.go:[0-9]+:)' 
status=${PIPESTATUS[0]}
passed=$(grep -c '^--- PASS' "$log")
failed=$(grep -c '^--- FAIL' "$log")
skipped=$(grep -c '^--- SKIP' "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # the build or TestMain failed before any test ran
  tail -30 "$log"
fi
[ "$skipped" -gt 0 ] && echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ]
