#!/usr/bin/env bash
# ctest systemd_units_verify: `systemd-analyze verify` on both units, inside the package's
# installed tree ROOT (`packaging/build-deb --stage`), so every program a unit runs must be
# in the package (or, /bin/kill, in a package it depends on). Any output at all fails the test: verify exits 0 on warnings such as an
# unknown key. Skipped (exit 77) where systemd-analyze is not installed (Debian: systemd).
set -euo pipefail
root=${1:?usage: units_verify_test.sh ROOT WORK}
work=${2:?usage: units_verify_test.sh ROOT WORK}
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze not found (Debian package systemd; scripts/install-deps)"
  exit 77
fi
# The package's tree (hard links, no copies) plus this machine's own units, which the
# default dependencies (sysinit.target, multi-user.target, ...) name.
rm -rf "$work"
cp -al "$root" "$work" 2>/dev/null || cp -a "$root" "$work"
cp -an /lib/systemd/system/. "$work/lib/systemd/system/"
# ExecReload='s /bin/kill comes from procps, which the package depends on.
mkdir -p "$work/bin" && cp -a "$(readlink -f /bin/kill)" "$work/bin/kill"
units=(gpusched-server.service gpusched-agent.service)
set +e
out=$(systemd-analyze verify --man=no --root="$work" "${units[@]}" 2>&1)
rc=$?
set -e
rm -rf "$work"
echo "systemd-analyze verify --root=ROOT ${units[*]}: exit $rc${out:+, said:}"
[ -z "$out" ] || echo "$out"
[ "$rc" -eq 0 ] && [ -z "$out" ]
