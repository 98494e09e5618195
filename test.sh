#!/usr/bin/env bash
# The whole test suite, as CI runs it: stores, vet, staticcheck, race tests.
# Usage: ./test.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:$(go env GOPATH)/bin"

scripts/stores.sh

if ! command -v staticcheck >/dev/null; then
	echo "test: installing staticcheck" >&2
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

go vet ./...
GOOS=darwin go vet ./...
GOOS=windows go vet ./...
staticcheck ./...
# includes the fault suite's short run of every store mode (internal/faultsuite TestModes, a few minutes; see
# docs/faults.md): it fails on any missed goal
go test -race -count=1 -timeout 20m "$@" ./...
# the benchmark module (peers live there, not in go.mod)
if [ -f bench/go.mod ]; then
	(cd bench && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 10m ./...)
fi
