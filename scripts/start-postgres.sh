#!/usr/bin/env bash
# Makes sure a PostgreSQL server replies on 127.0.0.1:5432 for user postgres (trust auth):
# starts the local cluster if it is down, installs PostgreSQL from apt if it is missing.
set -euo pipefail

replies() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if ! command -v pg_ctlcluster >/dev/null; then
  echo "start-postgres: installing PostgreSQL from apt"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
if ! replies; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "start-postgres: starting cluster $version/main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # A fresh apt install asks for passwords on TCP; tests use the trust auth of these machines.
  if ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  fi
fi
for _ in $(seq 1 30); do
  replies && exit 0
  sleep 1
done
echo "start-postgres: PostgreSQL does not reply on 127.0.0.1:5432" >&2
exit 1
