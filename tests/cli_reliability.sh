#!/usr/bin/env bash
# cli_reliability.sh - regressions of issue 14 (reliability and hygiene), end to end:
#   outputs  an empty or too-long path (--out "", a 4000-byte --out, ...) is exit 2 in
#            every subcommand and creates nothing; a run under a ~1000-byte path trains,
#            evaluates and exports (item 1, 6)
#   flags    --lengths with empty items, --seed -1, --temperature inf / nan: exit 2
#            naming the flag (item 9)
#   force    --force with a bad data path, a model or batch too big for memory: refused
#            and the old run byte-identical (item 2); a huge batch refused naming its keys
#            before anything batch-sized is allocated (item 4)
#   progress not a TTY (ctest): train, eval and sweep write plain log lines, never "\r";
#            --quiet writes no step lines; on a pseudo-terminal (script -qc) the live
#            line is redrawn in place and metrics.jsonl stays one JSON object a line (13)
#   steps 0  train.steps 0 saves the initial weights as step 0, which eval, export and
#            generate accept; too little training data names what is needed (item 10)
. "$(dirname "$0")/lib_cli.sh" reliability

# expect CODE WHAT 'SUBSTRING' -- CMD...
expect() {
    local code=$1 what=$2 want=$3; shift 4
    expect_rc "$code" "$what" "$@"
    [ -z "$want" ] || expect_err "$want"
}
cat >tiny.json <<EOF2
{
  "model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
  "train": {"batch_size": 4, "seq_len": 16, "steps": 2, "eval_every": 2, "eval_batches": 1, "log_every": 1,
            "checkpoint_every": 2, "threads": 1, "schedule": {"kind": "constant", "warmup": 0}}
}
EOF2
expect 0 "tiny run" "" -- "$BIN" train tiny.json --out run --quiet

# ---- item 1: an empty path is never the filesystem root ----
# A binary with the bug writes /config.json, /checkpoints/...: as root the cases run as
# nobody (setpriv), so a regression fails the test without touching the real root.
ls -A / >root_before.txt
as_nobody=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$T" && chmod 644 tiny.json
fi
expect 2 "train --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" train tiny.json --out "" --quiet
expect 2 "train --resume ''" "--resume: empty path" -- "${as_nobody[@]}" "$BIN" train --resume "" --quiet
expect 2 "train ''" "CONFIG: empty path" -- "${as_nobody[@]}" "$BIN" train "" --quiet
expect 2 "eval ''" "empty path" -- "${as_nobody[@]}" "$BIN" eval "" --lengths 16 --quiet
expect 2 "eval --json ''" "--json: empty path" -- "${as_nobody[@]}" "$BIN" eval run --lengths 16 --json "" --quiet
expect 2 "export --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" export run --out ""
expect 2 "export ''" "empty path" -- "${as_nobody[@]}" "$BIN" export "" --out exp
expect 2 "generate ''" "empty path" -- "${as_nobody[@]}" "$BIN" generate "" --tokens 2
expect 2 "sweep --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" sweep tiny.json --out ""
expect 2 "bench --json ''" "--json: empty path" -- "${as_nobody[@]}" "$BIN" bench --preset tiny --json ""
expect 2 "data --path ''" "--path: empty path" -- "${as_nobody[@]}" "$BIN" data --source text --path ""
ls -A / >root_after.txt
cmp -s root_before.txt root_after.txt && ok || bad "the filesystem root changed: $(diff root_before.txt root_after.txt)"
[ ! -e exp ] && ok || bad "export '' created exp"

# ---- item 6: long paths are used whole, or refused by name ----
long="$T/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))/$(printf 'f%.0s' $(seq 200))/$(printf 'g%.0s' $(seq 200))/$(printf 'h%.0s' $(seq 200))"
expect 0 "train under a ${#long}-byte path" "" -- "$BIN" train tiny.json --out "$long/run" --quiet
expect 0 "eval under a long path" "" -- "$BIN" eval "$long/run" --lengths 16,32 --quiet
[ -s "$long/run/eval_valid_nonoverlapping.json" ] && ok || bad "eval report missing under the long path"
expect 0 "eval of a checkpoint under a long path" "" -- "$BIN" eval "$long/run/checkpoints/step_00000002.ckpt" --lengths 16 --quiet
expect 0 "export under a long path" "" -- "$BIN" export "$long/run" --out "$long/exp"
[ -s "$long/exp/model.safetensors" ] && ok || bad "export missing under the long path"
huge="$T/$(printf 'x%.0s' $(seq 4000))"
expect 2 "train --out 4000 bytes" "--out: directory path is" -- "$BIN" train tiny.json --out "$huge" --quiet
expect 2 "data.path 4000 bytes" "data.path" -- "$BIN" train tiny.json --out r2 --quiet --set "data.source=text" --set "data.path=$huge"

# ---- item 9: flag values that used to be read loosely ----
expect 2 "--lengths 16,,32" "--lengths '16,,32'" -- "$BIN" eval run --lengths 16,,32 --quiet
expect 2 "--lengths 16," "--lengths" -- "$BIN" eval run --lengths 16, --quiet
expect 2 "--lengths ,16" "--lengths" -- "$BIN" eval run --lengths ,16 --quiet
expect 2 "generate --seed -1" "--seed '-1'" -- "$BIN" generate run --seed -1 --tokens 2
expect 2 "generate --temperature inf" "--temperature 'inf'" -- "$BIN" generate run --temperature inf --tokens 2
expect 2 "generate --temperature nan" "--temperature 'nan'" -- "$BIN" generate run --temperature nan --tokens 2
expect 2 "bench --eval 64,,128" "--eval" -- "$BIN" bench --preset tiny --eval 64,,128
expect 2 "data --seed -1" "--seed" -- "$BIN" data --source synthetic --seed -1
expect 0 "generate --seed 0 --temperature 0" "" -- "$BIN" generate run --seed 0 --temperature 0 --tokens 2

# ---- item 2: --force replaces the old run only when the new one is ready ----
snap() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }
before=$(snap run)
expect 3 "--force with a missing corpus" "no-such.txt" -- "$BIN" train tiny.json --out run --force --quiet \
    --set data.source=text --set "data.path=$T/no-such.txt"
[ "$(snap run)" = "$before" ] && ok || bad "--force with a missing corpus changed the old run"
expect 6 "--force with a model too big" "GiB" -- "$BIN" train tiny.json --out run --force --quiet \
    --set model.d_model=65536 --set model.n_heads=1 --set model.n_layers=256
[ "$(snap run)" = "$before" ] && ok || bad "--force with a model too big changed the old run"
# ---- item 4: a batch too big for memory names its keys, before allocating it ----
expect 6 "huge batch" "train.batch_size 1048576 x train.seq_len 2048" -- "$BIN" train tiny.json --out run \
    --force --quiet --set train.batch_size=1048576 --set train.seq_len=2048 --set train.eval_batches=0
[ "$(snap run)" = "$before" ] && ok || bad "--force with a huge batch changed the old run"
expect 0 "--force with a good config" "" -- "$BIN" train tiny.json --out run --force --quiet --set train.seed=7
[ "$(snap run)" != "$before" ] && ok || bad "--force with a good config did not replace the run"
echo keep >run/notes.txt
expect 0 "--force keeps files that are not the run's" "" -- "$BIN" train tiny.json --out run --force --quiet
[ -f run/notes.txt ] && ok || bad "--force removed a file that is not part of the run"

# ---- item 10: train.steps 0 is a baseline checkpoint ----
expect 0 "train.steps 0" "" -- "$BIN" train tiny.json --out s0 --quiet --set train.steps=0
[ -s s0/checkpoints/step_00000000.ckpt ] && grep -q '"step": 0, "val_loss"' s0/metrics.jsonl && ok \
    || bad "train.steps 0 wrote no step-0 checkpoint / validation record: $(ls -R s0; cat s0/metrics.jsonl)"
expect 0 "eval of step 0" "" -- "$BIN" eval s0 --lengths 16 --quiet
grep -q "step_00000000.ckpt" s0/eval_valid_nonoverlapping.json && ok || bad "eval of s0 did not use the step-0 checkpoint"
expect 0 "export of step 0" "" -- "$BIN" export s0 --out s0x
expect 0 "generate from step 0" "" -- "$BIN" generate s0 --tokens 3
expect 0 "resume a step-0 run" "" -- "$BIN" train --resume s0 --quiet --set train.steps=2
[ -s s0/checkpoints/step_00000002.ckpt ] && ok || bad "resuming the step-0 run did not train to step 2"
expect 2 "too little training data" "needs at least train.seq_len + 2 = 4002 tokens" -- "$BIN" train tiny.json \
    --out small --quiet --set train.seq_len=4000 --set train.eval_batches=0

# ---- item 13: progress output ----
CR=$(printf '\r')
no_cr() { if grep -q "$CR" "$1"; then bad "$2: carriage return in non-TTY output"; else ok; fi; }
expect 0 "train, not a TTY" "" -- "$BIN" train tiny.json --out p1 --set train.steps=4 --set train.log_every=2
expect_err "step 2/4 | loss"
no_cr err.txt "train"
expect 0 "train --quiet" "" -- "$BIN" train tiny.json --out p2 --set train.steps=4 --set train.log_every=2 --quiet
if grep -q "step 2/4" err.txt; then bad "--quiet printed step lines"; else ok; fi
expect 0 "eval, not a TTY" "" -- "$BIN" eval p1 --lengths 16,32
no_cr err.txt "eval"
cat >sweep.json <<EOF2
{"base": "tiny.json", "set": {"train.steps": 2}, "grid": {"model.pos": ["alibi", "rope"]},
 "eval": {"lengths": [16, 32]}, "out": "$T/sw"}
EOF2
expect 0 "sweep, not a TTY" "" -- "$BIN" sweep sweep.json
no_cr err.txt "sweep"
# metrics.jsonl: one JSON object per line whatever the terminal
json_lines() { "$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$1" && ok || bad "$1 is not one JSON object a line"; }
json_lines p1/metrics.jsonl
if command -v script >/dev/null 2>&1; then
    # a pseudo-terminal: the live line is drawn ("\r" + erase line) and cleared
    script -qc "'$BIN' train tiny.json --out p3 --set train.steps=40 --set train.log_every=10" /dev/null >tty_train.txt 2>&1
    grep -q "$CR.\[Kstep [0-9]*/40 \[[#.]*\] loss .* tok/s ETA " tty_train.txt && ok || bad "no live step line on a TTY: $(tr '\r' '\n' <tty_train.txt | tail -3)"
    json_lines p3/metrics.jsonl
    grep -c '"loss"' p3/metrics.jsonl | grep -qx 4 && ok || bad "metrics.jsonl of the TTY run lacks its 4 step records"
    script -qc "'$BIN' eval p3 --lengths 16,64" /dev/null >tty_eval.txt 2>&1
    grep -q "$CR.\[Keval L=64: window [0-9]*/[0-9]* \[[#.]*\] .* tok/s ETA " tty_eval.txt && ok || bad "no live eval line on a TTY: $(tr '\r' '\n' <tty_eval.txt | head -3)"
    script -qc "'$BIN' train tiny.json --out p4 --set train.steps=4 --quiet" /dev/null >tty_quiet.txt 2>&1
    if grep -q "step [0-9]*/4" tty_quiet.txt; then bad "--quiet drew a live line on a TTY"; else ok; fi
else
    skip "live line on a TTY: script(1) not installed"
fi

finish cli_reliability
