#!/bin/sh
# Installs Debian's chromium for the browser test of `tui serve` (tests/tui/test_serve_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is already there. The test drives it through
# Playwright's Python package with executable_path=/usr/bin/chromium, so Playwright's own browser
# download (`playwright install`) is never needed, and neither is chromedriver.
set -eu
if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
/usr/bin/chromium --version
