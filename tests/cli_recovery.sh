#!/usr/bin/env bash
# cli_recovery.sh - failure and recovery of export and sweep (the recovery probe's findings):
#   export   a file that cannot be written (here a file size limit, `ulimit -f`, which fails
#            the tokenizer copy with EFBIG as a full disk fails it with ENOSPC) leaves an
#            earlier export exactly as it was and an empty --out empty, no temp files, and
#            the error says why; a directory in the way is refused before anything is
#            written; a --force export of a run without a tokenizer leaves no foreign one
#   sweep    a point's marker names the checkpoint it evaluated: a run trained again into
#            the point's dir with other keys (train --force, train --resume with more
#            steps) is refused naming the point and what changed, with the same config it
#            is evaluated again (also for a marker of an older stretch, by its file time)
#   MPI      OMPI_COMM_WORLD_SIZE / PMI_SIZE set without their launcher: exit 2 (an MPI build
#            would otherwise train as one process, each copy on its own)
#   --jobs   workers die with a SIGKILLed parent (no orphans holding OUT's lock); a worker
#            killed by SIGKILL is a failed point, exit 1, not an interruption (130)
#   output   a sweep names its tables only when they were written; `stretch data` lists a
#            cache file only when it was written
# (a real full disk, tmpfs: cli_diskfull.sh)
. "$(dirname "$0")/lib_cli.sh" cli_recovery

no_temps() { # DIR WHAT: no *.tmp.* file left in DIR
    if ls -a "$1" | grep -q '\.tmp\.'; then bad "$2: temp files left in $1: $(ls -a "$1" | tr '\n' ' ')"; else ok; fi
}

# ---- export: the files appear together or not at all ----
# a word-level run whose tokenizer.json (45 KB) is larger than its model (25 KB) and config
big_vocab_cfg words.json
tiny_text_run alibi
expect_rc 0 "train the word run" "$BIN" train words.json --out runw --quiet
expect_rc 0 "train the byte run" "$BIN" train cfg.json --out runb --quiet
tok=$(wc -c < runw/tokenizer.json)
[ "$tok" -gt 40000 ] && ok || bad "the word run's tokenizer.json is $tok bytes, expected > 40000"

expect_rc 0 "export the byte run" "$BIN" export runb --out exp
sha256sum exp/* > exp.sha
# 32 KiB: the model and config fit, the tokenizer copy does not (SIGXFSZ is ignored: EFBIG)
(ulimit -f 32; "$BIN" export runw --out exp --force >out.txt 2>err.txt); rc=$?
[ "$rc" = 3 ] && ok || bad "export --force past the file size limit: exit $rc, expected 3"
expect_err "exp/tokenizer.json: copy from runw/tokenizer.json failed: File too large"
sha256sum -c --quiet exp.sha >/dev/null 2>&1 && ok || { bad "a failed export --force changed the earlier export"; sha256sum -c exp.sha; }
no_temps exp "failed export --force"
(ulimit -f 32; "$BIN" export runw --out fresh >out.txt 2>err.txt); rc=$?
[ "$rc" = 3 ] && ok || bad "export into an empty dir past the limit: exit $rc, expected 3"
[ -z "$(ls -A fresh 2>/dev/null)" ] && ok || bad "a failed export left files: $(ls -A fresh | tr '\n' ' ')"
expect_rc 0 "export --force within the limit" "$BIN" export runw --out exp --force
cmp -s exp/tokenizer.json runw/tokenizer.json && ! sha256sum -c --quiet exp.sha >/dev/null 2>&1 && ok \
    || bad "export --force did not replace every file"
no_temps exp "export --force"

# a directory where a file of the export goes: refused before anything is written
mkdir -p blocked/tokenizer.json
expect_rc 3 "export --force, a directory in the way" "$BIN" export runb --out blocked --force
expect_err "blocked/tokenizer.json: is a directory"
[ ! -e blocked/model.safetensors ] && [ ! -e blocked/config.json ] && ok || bad "export wrote files before refusing"
no_temps blocked "refused export"

# a run without a tokenizer exported over one with: no foreign tokenizer.json stays
cp -r runb runb_notok && rm runb_notok/tokenizer.json
expect_rc 0 "export the word run" "$BIN" export runw --out exp2
expect_rc 0 "export --force a run without tokenizer.json" "$BIN" export runb_notok --out exp2 --force
[ ! -e exp2/tokenizer.json ] && ok || bad "the earlier export's tokenizer.json stayed beside another model"

# ---- sweep: a marker stands for the checkpoint it evaluated ----
tiny_synthetic_cfg syn.json
cat > sw.json <<'EOF'
{"base": "syn.json", "variants": [{"name": "alibi", "model.pos": "alibi"}], "eval": {"lengths": [16, 32]}}
EOF
expect_rc 0 "sweep" "$BIN" sweep sw.json --out sw --quiet
"$PY" - sw/alibi/sweep_done.json <<'EOF' && ok || bad "the marker does not name its checkpoint"
import json, sys
c = json.load(open(sys.argv[1]))["checkpoint"]
assert c["file"] == "step_00000002.ckpt" and c["step"] == 2 and len(c["crc32"]) == 8, c
EOF
cp sw/alibi/config.json point.json
expect_rc 0 "train --force into the point with another lr" "$BIN" train point.json --out sw/alibi --force --quiet \
    --set train.optimizer.lr=0.01
expect_rc 2 "sweep over a retrained point" "$BIN" sweep sw.json --out sw --quiet
expect_err "point alibi: sw/alibi holds a run of a different config (train.optimizer.lr"
expect_err "its checkpoint changed since the sweep evaluated it (step_00000002.ckpt CRC"
"$PY" - sw/results.json <<'EOF' && ok || bad "results.json still reports the old model"
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
assert r["state"] == "failed" and not r.get("results"), r["state"]
EOF
# the point's own config trained again: evaluated again, not skipped
expect_rc 0 "train --force into the point with its config" "$BIN" train point.json --out sw/alibi --force --quiet
expect_rc 0 "sweep re-evaluates it" "$BIN" sweep sw.json --out sw --quiet
expect_err "alibi: its checkpoint changed since the sweep evaluated it"
"$PY" - sw <<'EOF' && ok || bad "the re-evaluated point's marker or state"
import json, struct, sys, zlib
d = sys.argv[1]
m = json.load(open(d + "/alibi/sweep_done.json"))
hdr = open(d + "/alibi/checkpoints/step_00000002.ckpt", "rb").read(64)
assert m["checkpoint"]["crc32"] == "%08x" % struct.unpack("<I", hdr[56:60])[0], m["checkpoint"]
assert json.load(open(d + "/results.json"))["runs"][0]["state"] == "done"
EOF
expect_rc 0 "sweep again" "$BIN" sweep sw.json --out sw --quiet
expect_err "alibi: finished earlier, skipped"
# a marker of an older stretch (no "checkpoint"): kept while its checkpoint is older
"$PY" - sw/alibi/sweep_done.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); del m["checkpoint"]; json.dump(m, open(sys.argv[1], "w"))
EOF
expect_rc 0 "sweep, an older marker" "$BIN" sweep sw.json --out sw --quiet
expect_err "alibi: finished earlier, skipped"
touch -d '+1 minute' sw/alibi/checkpoints/step_00000002.ckpt
expect_rc 0 "sweep, an older marker and a newer checkpoint" "$BIN" sweep sw.json --out sw --quiet
expect_err "written after sweep_done.json"
# trained further with --resume: refused, naming train.steps
expect_rc 0 "train --resume with more steps" "$BIN" train --resume sw/alibi --set train.steps=4 --quiet
expect_rc 2 "sweep over a point trained further" "$BIN" sweep sw.json --out sw --quiet
expect_err "point alibi: sw/alibi holds a run of a different config (train.steps: 4 vs 2"
expect_err "step_00000002.ckpt CRC [0-9a-f]* then, step_00000004.ckpt CRC"

# ---- output: name only what was written ----
expect_rc 0 "sweep into a fresh out" "$BIN" sweep sw.json --out sw2 --quiet
(ulimit -f 1; "$BIN" sweep sw.json --out sw2 --quiet >out.txt 2>err.txt); rc=$?
[ "$rc" = 3 ] && ok || bad "sweep whose tables cannot be written: exit $rc, expected 3"
expect_err "the result tables were not all written: sw2/results.json: write failed: File too large"
grep -q "results in" err.txt && bad "the sweep names tables it did not write" || ok
for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog"; done > big.txt
(ulimit -f 20; "$BIN" data --source text --path big.txt --tokenizer byte --cache-dir cache >out.txt 2>err.txt); rc=$?
[ "$rc" = 0 ] && ok || bad "stretch data past the file size limit: exit $rc"
expect_err "could not write the token cache"
grep -Eq '^train .* -$' out.txt && ok || { bad "stretch data lists a train cache it did not write"; cat out.txt; }
grep -Eq '^valid .*valid\.byte\.tokens$' out.txt && ok || bad "stretch data lost the valid cache it wrote"

# ---- a launcher's process count that is not the MPI world: refused by either build ----
for v in OMPI_COMM_WORLD_SIZE PMI_SIZE; do
    # detect_leaks=0: an MPI build refuses after MPI_Init/MPI_Finalize, whose own allocations
    # LeakSanitizer would report (and turn exit 2 into 1) in the ASan pass
    expect_rc 2 "train with $v=2 and no launcher" env "$v=2" ASAN_OPTIONS=detect_leaks=0 "$BIN" train syn.json \
        --out "mpi_$v" --quiet
    expect_err "MPI"
    [ ! -e "mpi_$v" ] && ok || bad "$v=2 without a launcher: a run was started in mpi_$v"
done
expect_rc 0 "train inside a Slurm allocation (SLURM_NTASKS=2), one process" env SLURM_NTASKS=2 "$BIN" train syn.json \
    --out mpi_slurm --quiet

# ---- sweep --jobs: workers end with their parent; a SIGKILLed worker is exit 1 ----
cat > long.json <<'EOF'
{"base": "syn.json", "set": {"train.steps": 100000, "train.checkpoint_every": 20, "train.eval_every": 0},
 "variants": [{"name": "a", "model.pos": "alibi"}, {"name": "b", "model.pos": "rope"}], "eval": {"lengths": [16]}}
EOF
# wait_files FILE...: until each exists (at most 20 s)
wait_files() {
    local f ready
    for _ in $(seq 1 200); do
        ready=1
        for f in "$@"; do [ -e "$f" ] || ready=0; done
        [ $ready = 1 ] && return 0
        sleep 0.1
    done
    return 1
}
if command -v pgrep >/dev/null && command -v flock >/dev/null; then
    "$BIN" sweep long.json --out sk --jobs 2 --quiet >/dev/null 2>sk.err & P=$!
    wait_files sk/a/checkpoints/latest sk/b/checkpoints/latest || bad "--jobs 2: no checkpoints after 20 s"
    kids=$(pgrep -P $P | tr '\n' ' ')
    [ "$(echo $kids | wc -w)" = 2 ] && ok || bad "--jobs 2: workers '$kids', expected 2"
    kill -KILL $P; wait $P 2>/dev/null
    alive=$kids
    for _ in $(seq 1 100); do
        alive=""
        for k in $kids; do kill -0 "$k" 2>/dev/null && alive="$alive $k"; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    [ -z "$alive" ] && ok || bad "workers$alive still run 10 s after their sweep was killed"
    [ -n "$alive" ] && kill -KILL $alive 2>/dev/null   # an old binary's orphans
    flock -n sk true && ok || bad "the sweep's out directory is still locked after its process died"
    sed 's/"train.eval_every": 0/"train.eval_every": 0, "train.max_seconds": 0.2/' long.json > short.json
    expect_rc 1 "the killed sweep again (stopped by train.max_seconds)" "$BIN" sweep short.json --out sk --jobs 2 --quiet
    grep -q "in use by another" err.txt && bad "the killed sweep's out is still in use" || ok
    expect_err "resuming training at step"

    # one worker SIGKILLed (as by the out-of-memory killer): that point failed, exit 1
    sed 's/"name": "b", "model.pos": "rope"/"name": "b", "model.pos": "rope", "train.steps": 4/' long.json > kill.json
    "$BIN" sweep kill.json --out sj --jobs 2 --quiet >/dev/null 2>sj.err & P=$!
    # once b is done, the one worker left trains a
    wait_files sj/a/checkpoints/latest sj/b/sweep_done.json || bad "--jobs 2: points a and b not started after 20 s"
    for _ in $(seq 1 100); do [ "$(pgrep -P $P | wc -l)" = 1 ] && break; sleep 0.1; done
    kids=$(pgrep -P $P | tr '\n' ' ')
    [ "$(echo $kids | wc -w)" = 1 ] && ok || bad "--jobs 2: workers '$kids', expected the one of point a"
    kill -KILL $kids
    for _ in $(seq 1 600); do kill -0 $P 2>/dev/null || break; sleep 0.1; done
    kill -KILL $P 2>/dev/null   # still running after 60 s: a failure below
    wait $P; rc=$?
    [ "$rc" = 1 ] && ok || { bad "a sweep whose worker was SIGKILLed: exit $rc, expected 1"; tail -3 sj.err; }
    grep -q "the run's process was killed by signal 9" sj.err && ok || { bad "no message for the killed worker"; tail -3 sj.err; }
    grep -q "1 of 2 runs finished" sj.err && ok || { bad "the other point did not finish"; tail -3 sj.err; }
else
    skip "sweep --jobs recovery: needs pgrep and flock"
fi

finish cli_recovery
