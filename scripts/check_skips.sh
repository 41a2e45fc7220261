#!/usr/bin/env bash
# check_skips.sh CTEST_OUTPUT - fail when ctest skipped a test although everything the
# tests can skip for is present: the shared data ($STRETCH_DATA_DIR: wikitext-2,
# tinyshakespeare), PyTorch (/usr/bin/python3 -c 'import torch') and a tmpfs mount in a
# private namespace (cli_diskfull.sh). A skip is then a
# broken test setup (a wrong STRETCH_DATA_DIR in the build, a renamed file, ...) that
# would otherwise pass CI unnoticed. With an input missing, skips are expected and listed.
set -uo pipefail
log=${1:?usage: check_skips.sh CTEST_OUTPUT}
skipped=$(grep -E '\*\*\*Skipped|Not Run' "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | sort -u)
[ -z "$skipped" ] && exit 0
data=${STRETCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
missing=()
[ -f "$data/wikitext-2/train.txt" ] || missing+=("$data/wikitext-2/train.txt")
[ -f "$data/tinyshakespeare/input.txt" ] || missing+=("$data/tinyshakespeare/input.txt")
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || missing+=("PyTorch (/usr/bin/python3 -c 'import torch')")
# cli_diskfull.sh mounts a tmpfs in a private mount namespace (root: unshare -m, else -rm)
if [ "$(id -u)" = 0 ]; then ns="unshare -m"; else ns="unshare -rm"; fi
mnt=$(mktemp -d)
$ns sh -c "mount -t tmpfs tmpfs '$mnt'" >/dev/null 2>&1 || missing+=("a tmpfs mount ($ns mount -t tmpfs)")
rmdir "$mnt"
if [ "${#missing[@]}" -gt 0 ]; then
    echo "check_skips: skipped (inputs missing: ${missing[*]}):" $skipped
    exit 0
fi
echo "check_skips: FAIL: these tests were skipped although their data, PyTorch and a tmpfs mount are present:" $skipped >&2
exit 1
