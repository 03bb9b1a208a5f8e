#!/usr/bin/env bash
# status-page-screenshots.sh: refresh docs/status-page.png, the screenshot
# docs/operations.md shows. It runs the admin package's
# TestStatusPageScreenshots, which starts a server with a few locks, holders
# and waiters, opens the status page in Debian's headless chromium (make deps
# installs it) through chromedp, lets the charts fill for a few seconds, and
# writes the PNG.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 -run '^TestStatusPageScreenshots$' ./admin -args -screenshots "$PWD/docs"
