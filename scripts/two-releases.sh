#!/usr/bin/env bash
# Two releases side by side: builds the previous release's backend (the commit
# deploy/previous-release names, checked out in a git worktree under target/previous-release/)
# and runs backend/tests/two_releases/ with it: the previous release migrates and serves, this
# release's `backend migrate` runs as the release step, and both then serve one database and
# bank, each request to one or the other.
#
# The previous release builds in a target directory of its own: in the workspace's, its crates
# would overwrite this release's artifacts of the same name and version (cargo names them by
# package, not by path) and leave them looking fresh. That first build compiles every dependency
# (about 3 minutes on 2 cores); later runs only what changed. Called by tests/run-all.sh.
# PREVIOUS_RELEASE=<commit> tries another commit as the previous release (to see what breaks).
# `--build-only` builds the previous release and stops: tests/run-all.sh runs it in the
# background during the soaks, whose fixed durations leave CPU time idle, and the test after them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
build_only=false
case "${1:-}" in
  --build-only) build_only=true ;;
  "") ;;
  *) echo "usage: scripts/two-releases.sh [--build-only]" >&2; exit 2 ;;
esac

commit=${PREVIOUS_RELEASE:-$(grep -v '^#' deploy/previous-release | tr -d '[:space:]')}
[ -n "$commit" ] || { echo "two-releases: deploy/previous-release names no commit" >&2; exit 1; }
# A shallow clone may lack it: fetch it from where the clone came from.
git cat-file -e "$commit^{commit}" 2>/dev/null || git fetch --quiet origin "$commit" 2>/dev/null \
  || { echo "two-releases: $commit is not in this clone's history (a shallow clone?)" >&2; exit 1; }

work=target/previous-release
source_dir=$work/src
if [ "$(git -C "$source_dir" rev-parse HEAD 2>/dev/null)" != "$commit" ]; then
  rm -rf "$source_dir"
  git worktree prune
  git worktree add --detach --force "$source_dir" "$commit" >/dev/null
fi
echo "two-releases: building the previous release's backend ($commit)"
(cd "$source_dir" && CARGO_TARGET_DIR="$PWD/../target" cargo build -p backend --bin backend --locked --quiet)
previous=$PWD/$work/target/debug/backend
if $build_only; then
  echo "two-releases: the previous release built in $((SECONDS - started)) s"
  exit 0
fi

# Named from the workspace, not `-p backend`: the binaries and the test binary tests/run-all.sh's
# native tests built, where `-p backend` would unify features differently and rebuild 43 crates
# (86 s).
cargo build --workspace --bins --locked --quiet
PREVIOUS_RELEASE_BACKEND=$previous \
  cargo test --workspace --test two_releases --locked -- --ignored --nocapture
echo "two-releases: passed in $((SECONDS - started)) s"
