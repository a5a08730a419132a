#!/usr/bin/env bash
# Idempotent: installs Debian's chromium and chromium-driver (the report tests drive the page through Selenium)
# only when one is missing. Needs root (CI runs as root); elsewhere it says why it did nothing and exits 0,
# and the browser tests then skip with the reason.
set -euo pipefail
have_browser() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
if have_browser && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium.sh: chromium or chromedriver missing and cannot apt-get install them here (not root or no apt-get); the browser tests will skip" >&2
  exit 0
fi
echo "install_chromium.sh: installing chromium and chromium-driver (Debian packages) for the report browser tests" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null || {
    echo "install_chromium.sh: apt-get install chromium chromium-driver failed; the browser tests will skip" >&2
    exit 0
  }
fi
