#!/usr/bin/env bash
# Makes the root filesystem of deploy/verify-compose.sh's stand-in for the official PostgreSQL
# image, from Debian's own packages (mmdebstrap, minbase with postgresql-15, no docs), as
# target/compose/debian-postgres-rootfs.tar, unless it is already there; prints its path.
# Mostly downloads and unpacking: tests/run-all.sh starts it in the background early, while the
# cores compile, and the compose check finds it made.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

rootfs=target/compose/debian-postgres-rootfs.tar
if [ ! -f "$rootfs" ]; then
  command -v mmdebstrap >/dev/null || { echo "postgres-rootfs: mmdebstrap is missing; run scripts/setup-tools.sh" >&2; exit 1; }
  mkdir -p target/compose
  rm -rf "$rootfs.partial"
  echo "postgres-rootfs: making PostgreSQL's root filesystem from Debian's packages (mmdebstrap)" >&2
  # --format=tar: mmdebstrap picks the output's kind from its name's ending otherwise, and
  # ".partial" would make a directory.
  timeout 900 mmdebstrap --quiet --format=tar --variant=minbase --include=postgresql-15 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' bookworm "$rootfs.partial" >&2 \
    || { echo "postgres-rootfs: mmdebstrap could not make the root filesystem" >&2; exit 1; }
  mv "$rootfs.partial" "$rootfs"
fi
echo "$rootfs"
