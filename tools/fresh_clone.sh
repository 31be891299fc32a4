#!/usr/bin/env bash
# A new user's first run, for real: clone this repository into an empty directory and run
# the README's two commands there, with an empty ~/.cache/jupyter_superfluid (nothing built
# or downloaded before), timing each command.
#
#   tools/fresh_clone.sh [--empty-pip-cache] [WORKDIR]
#
# --empty-pip-cache also starts pip with an empty cache, as on a new machine (llama-cpp-python
# then compiles from source: add 4 to 8 minutes). WORKDIR defaults to a new temporary
# directory; the clone is WORKDIR/clone, the cache WORKDIR/cache. Exits with the test run's code.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
pip_cache=keep
if [ "${1:-}" = "--empty-pip-cache" ]; then pip_cache=empty; shift; fi
work="${1:-$(mktemp -d /tmp/superfluid-fresh.XXXXXX)}"
mkdir -p "$work"
git clone -q "$repo" "$work/clone"
mkdir -p "$work/cache"
export SUPERFLUID_CACHE="$work/cache"  # stands in for ~/.cache/jupyter_superfluid, empty
if [ "$pip_cache" = empty ]; then export PIP_CACHE_DIR="$work/pip-cache"; fi
cd "$work/clone"
echo "fresh clone of $(git rev-parse --short HEAD) in $work/clone; cache $SUPERFLUID_CACHE"
start=$(date +%s)
python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]"
installed=$(date +%s)
echo "install: $((installed - start)) s"
rc=0
.venv/bin/python -m pytest || rc=$?
done_at=$(date +%s)
echo "install: $((installed - start)) s; tests: $((done_at - installed)) s; pytest exit code $rc"
exit $rc
