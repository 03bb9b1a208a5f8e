#!/usr/bin/env bash
# status-page-screenshots.sh: refresh docs/status-page.png (1400 px wide)
# and docs/status-page-narrow.png (800 px), the screenshots
# docs/operations.md shows. It runs the admin package's
# TestStatusPageScreenshots, which starts a server with lock statistics on,
# makes some 20 seconds of traffic, takes a few locks with holders and
# waiters, then opens the status page in Debian's headless chromium (make
# deps installs it) through chromedp at each width, the charts and events
# drawn from the server's history, and writes the PNGs.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 -run '^TestStatusPageScreenshots$' ./admin -args -screenshots "$PWD/docs"
