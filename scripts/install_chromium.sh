#!/usr/bin/env bash
# Headless Chromium for the report test (tests/quality/test_report_chromium.py).
# Idempotent: does nothing when /usr/bin/chromium is already there. Debian's package,
# installed with apt (needs root); no browser download from anywhere else.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    SUDO=sudo
else
    SUDO=
fi
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium
/usr/bin/chromium --version
