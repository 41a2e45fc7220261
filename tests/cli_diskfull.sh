#!/usr/bin/env bash
# cli_diskfull.sh - a full disk (a small tmpfs) under export and sweep: an export whose
# tokenizer copy runs out of space leaves the earlier export as it was (and an empty --out
# empty), no temp files, and says "No space left on device"; a sweep whose tables cannot
# be written does not name them as written. The tmpfs is mounted in a private mount
# namespace (unshare -m as root, unshare -rm otherwise), so nothing outlives the test;
# where mounting is not permitted the test reports skipped (exit 77).
# (the same failures without a mount, by a file size limit: cli_recovery.sh)
. "$(dirname "$0")/lib_cli.sh" cli_diskfull

if [ "$(id -u)" = 0 ]; then ns=(unshare -m); else ns=(unshare -rm); fi
mkdir -p full
if ! command -v unshare >/dev/null || ! "${ns[@]}" sh -c 'mount -t tmpfs -o size=64k tmpfs full' 2>/dev/null; then
    skip "mounting a tmpfs is not permitted here (${ns[*]} mount -t tmpfs)"
    finish cli_diskfull
fi

# a word-level run whose tokenizer.json (45 KB) is larger than its model (25 KB)
big_vocab_cfg words.json
tiny_text_run alibi
expect_rc 0 "train the word run" "$BIN" train words.json --out runw --quiet
expect_rc 0 "train the byte run" "$BIN" train cfg.json --out runb --quiet
expect_rc 0 "export the byte run (sizes)" "$BIN" export runb --out sizes
expect_rc 0 "export the word run (sizes)" "$BIN" export runw --out sizesw
pages() { echo $(( ($(wc -c < "$1") + 4095) / 4096 * 4 )); }
# room for the byte run's export and the word run's model and config, 8 KiB to spare:
# the word run's 45 KB tokenizer.json does not fit
freshkb=$(( $(pages sizesw/model.safetensors) + $(pages sizesw/config.json) + 8 ))
kb=$(( $(pages sizes/model.safetensors) + $(pages sizes/config.json) + $(pages sizes/tokenizer.json) + freshkb ))

# the sweep: finished on the real disk, its out then copied into a tmpfs too small for results.json
tiny_synthetic_cfg syn.json
echo '{"base": "syn.json", "variants": [{"name": "alibi", "model.pos": "alibi"}], "eval": {"lengths": [16, 32]}}' > sw.json
expect_rc 0 "sweep" "$BIN" sweep sw.json --out sw --quiet
swkb=$(( $(du -sk sw | cut -f1) + 8 ))

cat > inside.sh <<'EOF'
# runs in the private mount namespace; each case's exit code and output in files
set -u
mount -t tmpfs -o size=${KB}k tmpfs full || exit 99
"$BIN" export runb --out full/exp > /dev/null 2>&1 || exit 98
sha256sum full/exp/* > exp.sha
"$BIN" export runw --out full/exp --force > force.out 2> force.err; echo $? > force.rc
sha256sum -c --quiet exp.sha > force.sha 2>&1; echo $? >> force.sha
ls -a full/exp > force.ls
umount full
mount -t tmpfs -o size=${FRESHKB}k tmpfs full || exit 99
"$BIN" export runw --out full/fresh > fresh.out 2> fresh.err; echo $? > fresh.rc
ls -A full/fresh > fresh.ls 2>&1
umount full
mount -t tmpfs -o size=${SWKB}k tmpfs full || exit 99
cp -a sw full/sw
cat /dev/zero > full/filler 2>/dev/null   # the rest of the space
"$BIN" sweep sw.json --out full/sw --quiet > sweep.out 2> sweep.err; echo $? > sweep.rc
EOF
KB=$kb FRESHKB=$freshkb SWKB=$swkb BIN=$BIN "${ns[@]}" bash inside.sh; rc=$?
[ "$rc" = 0 ] && ok || bad "the tmpfs steps failed (exit $rc)"

[ "$(cat force.rc)" = 3 ] && ok || bad "export --force onto a full disk: exit $(cat force.rc), expected 3"
grep -q "full/exp/tokenizer.json: .*No space left on device" force.err && ok || { bad "no reason in the message"; cat force.err; }
[ "$(tail -1 force.sha)" = 0 ] && ok || { bad "a failed export --force changed the earlier export"; cat force.sha; }
grep -q '\.tmp\.' force.ls && bad "temp files left: $(tr '\n' ' ' < force.ls)" || ok
[ "$(cat fresh.rc)" = 3 ] && ok || bad "export into an empty dir on a full disk: exit $(cat fresh.rc), expected 3"
[ ! -s fresh.ls ] && ok || bad "a failed export left files: $(tr '\n' ' ' < fresh.ls)"
[ "$(cat sweep.rc)" = 3 ] && ok || { bad "sweep on a full disk: exit $(cat sweep.rc), expected 3"; tail -3 sweep.err; }
grep -q "the result tables were not all written: .*No space left on device" sweep.err && ok \
    || { bad "the sweep does not say its tables were not written"; tail -3 sweep.err; }
grep -q "results in" sweep.err && bad "the sweep names tables it did not write" || ok

finish cli_diskfull
