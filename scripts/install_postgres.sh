#!/usr/bin/env bash
# PostgreSQL server for the shared metastore of the loopback cluster (scripts/cluster.py,
# tests/cluster). Idempotent: does nothing when Debian's server is already installed.
# Debian's package, installed with apt (needs root or sudo); no service is started:
# scripts/cluster.py runs its own server in its run folder, on 127.0.0.1 only.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    SUDO=sudo
else
    SUDO=
fi
$SUDO apt-get update
# policy-rc.d: install without starting the distribution's own cluster service.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
ls /usr/lib/postgresql/*/bin/postgres
