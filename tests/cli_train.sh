#!/usr/bin/env bash
# cli_train.sh - `stretch train` end to end through the real binary ($STRETCH_BIN):
# bad configs and --set errors exit 2 naming the file and key path; a missing config
# exits 3; a tiny run writes the documented run-dir layout; an occupied run dir is
# refused (exit 3) and left untouched; SIGINT saves a checkpoint and exits 130, and the
# resumed trace is bit-identical to an uninterrupted run; SIGTERM likewise; a corrupt or
# mismatched checkpoint exits 5 naming the file. A wsd run resumed from its stable phase
# with more steps is the longer run, step for step.
set -u
BIN="${STRETCH_BIN:?set STRETCH_BIN to the stretch binary}"
SRC="${STRETCH_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/stretch-cli-train-XXXXXX")"
PASS=0
FAIL=0
ok()   { PASS=$((PASS + 1)); }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }

# run CMD...: sets RC and ERR (stderr text)
run() { "$@" >"$TMP/out" 2>"$TMP/err"; RC=$?; ERR="$(cat "$TMP/err")"; }

expect() {   # expect CODE SUBSTRING CMD...
    local code="$1" want="$2"; shift 2
    run "$@"
    if [ "$RC" -ne "$code" ]; then bad "$* -> exit $RC, expected $code: $ERR"; return; fi
    case "$ERR" in *"$want"*) ok ;; *) bad "$* -> message lacks '$want': $ERR" ;; esac
}

# ---- bad configs: exit 2, message names file and key path ----
F="$SRC/tests/configs"
expect 2 "$F/bad_json.json: invalid JSON at line 3"                        "$BIN" train "$F/bad_json.json"
expect 2 "$F/bad_unknown_key.json: model.n_head: unknown key (did you mean \"model.n_heads\"?)" "$BIN" train "$F/bad_unknown_key.json"
expect 2 "$F/bad_nested_key.json: train.optimizer.betas: unknown key"       "$BIN" train "$F/bad_nested_key.json"
expect 2 "$F/bad_type.json: train.steps: expected an integer, got \"100\""   "$BIN" train "$F/bad_type.json"
expect 2 "$F/bad_range.json: train.batch_size: must be in [1,"              "$BIN" train "$F/bad_range.json"
expect 2 "$F/bad_heads.json: model.n_heads: must divide model.d_model (512 % 6 != 0)" "$BIN" train "$F/bad_heads.json"
expect 2 "$F/bad_enum.json: model.pos: unknown value \"alibi2\""            "$BIN" train "$F/bad_enum.json"
expect 2 "$F/bad_section.json: training: unknown key"                       "$BIN" train "$F/bad_section.json"
# nothing was created for them
check '[ ! -e runs/bad_json ] && [ ! -e runs/bad_heads ]' "a rejected config created a run dir"

# ---- a tiny valid config ----
CFG="$TMP/tiny.json"
cat >"$CFG" <<EOF
{
  "model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$TMP/cache",
           "synthetic": {"vocab": 32, "tokens": [40000, 4000, 4000]}},
  "train": {"batch_size": 8, "seq_len": 16, "steps": 12, "log_every": 1, "eval_every": 6, "eval_batches": 2,
            "checkpoint_every": 6, "threads": 1, "optimizer": {"lr": 0.01}, "schedule": {"warmup": 2}}
}
EOF

# ---- --set and usage errors ----
expect 2 "--set model.n_head: unknown key"                    "$BIN" train "$CFG" --set model.n_head=4 --out "$TMP/x"
expect 2 "--set train.steps: expected an integer, got \"ten\"" "$BIN" train "$CFG" --set train.steps=ten --out "$TMP/x"
expect 2 "--set model.pos: unknown value \"alibi3\""           "$BIN" train "$CFG" --set model.pos=alibi3 --out "$TMP/x"
expect 2 "--set train: is an object"                           "$BIN" train "$CFG" --set train=1 --out "$TMP/x"
# a value of a --set is named as the --set, not as the file's (which holds another)
expect 2 "--set model.n_heads=5: model.n_heads: must divide model.d_model" "$BIN" train "$CFG" --set model.n_heads=5 --out "$TMP/x"
expect 2 "--set train.schedule.warmup=50: train.schedule.warmup: 50 exceeds train.steps (12)" "$BIN" train "$CFG" --set train.schedule.warmup=50 --out "$TMP/x"
expect 2 "--set train.steps=1: train.schedule.warmup: 2 exceeds train.steps (1)" "$BIN" train "$CFG" --set train.steps=1 --out "$TMP/x"
expect 2 "expected section.key=value"                          "$BIN" train "$CFG" --set steps --out "$TMP/x"
expect 2 "missing CONFIG.json"                                 "$BIN" train
expect 2 "unknown option '--bogus'"                            "$BIN" train "$CFG" --bogus
expect 3 "$TMP/none.json: cannot open"                         "$BIN" train "$TMP/none.json"
check '[ ! -e "$TMP/x" ]' "a rejected --set created the run dir"

# ---- a run: the documented layout ----
R="$TMP/run"
expect 0 "" "$BIN" train "$CFG" --out "$R" --quiet
for f in config.json metrics.jsonl tokenizer.json checkpoints/latest checkpoints/best.ckpt \
         checkpoints/step_00000006.ckpt checkpoints/step_00000012.ckpt; do
    check '[ -s "$R/$f" ]' "missing $R/$f"
done
check '[ "$(cat "$R/checkpoints/latest")" = "step_00000012.ckpt" ]' "latest pointer"
check '[ "$(grep -c "\"loss\"" "$R/metrics.jsonl")" = 12 ] && [ "$(grep -c "\"val_loss\"" "$R/metrics.jsonl")" = 2 ]' "metrics records"
# learned receptive fields are traced in the validation records: [layer][head], moved off
# their initial rho (log parameterisation: rho = exp(theta)); alibi runs carry no trace
check '! grep -q rf_rho "$R/metrics.jsonl"' "an alibi run logged rf_rho"
RF="$TMP/run_rf"
expect 0 "" "$BIN" train "$CFG" --out "$RF" --quiet --set model.pos=alibi_rf --set model.rf.scope=head \
    --set model.rf.param=log --set model.rf.rho=8
check '/usr/bin/python3 - "$RF/metrics.jsonl" <<"PYEOF"
import json, sys
v = [r for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r]
rho = [x for r in v for layer in r["rf_rho"] for x in layer]
ok = len(v) == 2 and all(len(r["rf_rho"]) == 2 and all(len(l) == 4 for l in r["rf_rho"]) for r in v)
ok = ok and all(0 < x < 1e6 for x in rho) and any(abs(x - 8) > 1e-3 for x in rho)
sys.exit(0 if ok else 1)
PYEOF' "rf_rho trace in metrics.jsonl"
# the saved config trains the same way (loads back; vocab filled in from the data)
check 'grep -q "\"vocab_size\": 32" "$R/config.json"' "config.json lacks the resolved vocab_size"
expect 2 "model.vocab_size: 100 does not match the dataset's vocabulary (32)" "$BIN" train "$CFG" --out "$TMP/v" --set model.vocab_size=100 --quiet
# a run that failed before training leaves no run behind: the same --out works without --force
expect 0 "" "$BIN" train "$CFG" --out "$TMP/v" --set model.vocab_size=32 --set train.steps=2 --quiet

# ---- an occupied run dir: exit 3, untouched ----
snap() { (cd "$R" && find . -type f -exec md5sum {} + | sort); }
BEFORE="$(snap)"
expect 3 "already holds a run" "$BIN" train "$CFG" --out "$R" --quiet
check '[ "$(snap)" = "$BEFORE" ]' "refused run dir was modified"
expect 0 "" "$BIN" train "$CFG" --out "$R" --force --quiet --set train.steps=3
check '[ "$(grep -c "\"loss\"" "$R/metrics.jsonl")" = 3 ] && [ ! -e "$R/checkpoints/step_00000012.ckpt" ]' "--force did not replace the run"

# ---- SIGINT: checkpoint, exit 130, resume bit-identical ----
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }
S="$TMP/sig"
"$BIN" train "$CFG" --out "$S" --quiet --set train.steps=100000 --set train.checkpoint_every=0 \
    --set train.eval_every=0 >"$TMP/sig.out" 2>"$TMP/sig.err" &
PID=$!
for _ in $(seq 1 600); do
    [ -f "$S/metrics.jsonl" ] && [ "$(wc -l <"$S/metrics.jsonl")" -ge 3 ] && break
    sleep 0.05
done
kill -INT "$PID"
wait "$PID"
RC=$?
check '[ "$RC" -eq 130 ]' "SIGINT exit code $RC (expected 130): $(cat "$TMP/sig.err")"
check 'grep -q "interrupted by SIGINT" "$TMP/sig.err" && grep -q -- "--resume" "$TMP/sig.err"' "SIGINT message: $(cat "$TMP/sig.err")"
K="$(sed -E 's/step_0*([0-9]+)\.ckpt/\1/' "$S/checkpoints/latest" 2>/dev/null)"
check '[ -n "$K" ] && [ "$K" -ge 3 ]' "no checkpoint after SIGINT (latest: '$K')"
K="${K:-3}"
STOP=$((K + 5))
expect 0 "" "$BIN" train --resume "$S" --quiet --stop-after "$STOP"
REF="$TMP/ref"
expect 0 "" "$BIN" train "$CFG" --out "$REF" --quiet --set train.steps=100000 --set train.checkpoint_every=0 \
    --set train.eval_every=0 --stop-after "$STOP"
check '[ "$(trace "$S" | wc -l)" -eq "$STOP" ]' "resumed trace has $(trace "$S" | wc -l) records, expected $STOP"
check '[ "$(trace "$S")" = "$(trace "$REF")" ]' "interrupted+resumed loss trace differs from the uninterrupted one"

# ---- SIGTERM likewise ----
T="$TMP/term"
"$BIN" train "$CFG" --out "$T" --quiet --set train.steps=100000 --set train.eval_every=0 >/dev/null 2>"$TMP/term.err" &
PID=$!
for _ in $(seq 1 600); do
    [ -f "$T/metrics.jsonl" ] && [ "$(wc -l <"$T/metrics.jsonl")" -ge 2 ] && break
    sleep 0.05
done
kill -TERM "$PID"
wait "$PID"
RC=$?
check '[ "$RC" -eq 130 ] && grep -q "interrupted by SIGTERM" "$TMP/term.err"' "SIGTERM: exit $RC: $(cat "$TMP/term.err")"

# ---- wsd: the stable phase does not depend on train.steps, so a run stopped there and
# resumed with more steps decays at the new end and is, step for step, the run planned
# that long from the start (the point of warmup-stable-decay) ----
W="--set train.schedule.kind=wsd --set train.schedule.decay_frac=0.25 --quiet"
expect 0 "" "$BIN" train "$CFG" --out "$TMP/wsd_a" $W --stop-after 9
expect 0 "" "$BIN" train --resume "$TMP/wsd_a" --set train.steps=24 --quiet
expect 0 "" "$BIN" train "$CFG" --out "$TMP/wsd_b" $W --set train.steps=24
check '/usr/bin/python3 - "$TMP/wsd_a/metrics.jsonl" "$TMP/wsd_b/metrics.jsonl" <<"PYEOF"
import json, sys
def trace(p):
    return [(r["step"], r["loss"], r["lr"]) for r in map(json.loads, open(p)) if "loss" in r]
a, b = trace(sys.argv[1]), trace(sys.argv[2])
assert len(b) == 24 and a == b, (a, b)
lr = {s: x for s, _, x in b}
# warmup 2, stable to step 18 (24 - round(0.25 * 24)), then linear to 0.1 lr at 24
peak, lo = 0.01, 0.001
for s, want in [(1, peak / 2), (2, peak), (12, peak), (18, peak), (20, peak - (peak - lo) * 2 / 6), (24, lo)]:
    assert abs(lr[s] - want) <= 1e-9, (s, lr[s], want)
PYEOF' "wsd: a stable-phase checkpoint resumed with more steps differs from the longer run"
expect 2 "train.schedule.decay_frac: the decay's 3 steps (0.25 x 12) and train.schedule.warmup's 10 exceed train.steps (12)" \
    "$BIN" train "$CFG" --out "$TMP/wsd_c" $W --set train.schedule.warmup=10
check '[ ! -e "$TMP/wsd_c" ]' "a refused wsd config created its run dir"

# ---- resume errors: mismatched model, corrupt checkpoint ----
expect 2 "model.d_model: 32 vs 64" "$BIN" train --resume "$S" --set model.d_model=64 --quiet
CK="$S/checkpoints/$(cat "$S/checkpoints/latest")"
head -c 1000 "$CK" >"$CK.cut" && mv "$CK.cut" "$CK"
expect 5 "$CK: truncated" "$BIN" train --resume "$S" --quiet
expect 3 "not a run directory" "$BIN" train --resume "$TMP/nowhere" --quiet

# ---- keep_last prunes every older step file, however many there are (review 40): the
# pruning read at most 4096 names, so past that it kept an arbitrary sample and any file
# it never read. 4100 older step files beside a real one; a resume saves step 4102 and
# keep_last 2 must leave exactly steps 4101 and 4102 ----
cat >"$TMP/kl.json" <<JSON
{"model": {"n_layers": 1, "d_model": 8, "n_heads": 1, "pos": "alibi"},
 "data": {"source": "synthetic", "cache_dir": "$TMP/cache", "synthetic": {"vocab": 16, "tokens": [20000, 2000, 2000]}},
 "train": {"batch_size": 1, "seq_len": 4, "steps": 4102, "eval_every": 0, "eval_batches": 1, "threads": 1,
           "checkpoint_every": 0, "keep_last": 2, "log_every": 5000, "schedule": {"warmup": 1}}}
JSON
run "$BIN" train "$TMP/kl.json" --out "$TMP/kl" --quiet --stop-after 4101
check '[ "$RC" = 0 ] && [ -s "$TMP/kl/checkpoints/step_00004101.ckpt" ]' "keep_last run: exit $RC, no step 4101: $ERR"
for i in $(seq 1 4100); do printf -v f 'step_%08d.ckpt' "$i"; : >"$TMP/kl/checkpoints/$f"; done
run "$BIN" train --resume "$TMP/kl" --quiet
check '[ "$RC" = 0 ]' "keep_last resume: exit $RC: $ERR"
check '[ "$(cd "$TMP/kl/checkpoints" && ls step_*.ckpt | tr "\n" " ")" = "step_00004101.ckpt step_00004102.ckpt " ]' \
    "keep_last 2 left $(ls "$TMP/kl/checkpoints" | grep -c step_) step files"

# optimizer and schedule keys the chosen ones do not read are named when the training
# starts (review 42), not refused: a sweep over optimizer.name shares one base
expect 0 "not read by this position method, optimizer, schedule and Abacus setting, so without effect: train.optimizer.beta1 0.8, train.schedule.min_lr_ratio 0.5" \
    "$BIN" train "$TMP/kl.json" --out "$TMP/unread" --set train.steps=3 --set train.optimizer.name=sgd \
    --set train.optimizer.beta1=0.8 --set train.schedule.kind=constant --set train.schedule.min_lr_ratio=0.5
run "$BIN" train "$TMP/kl.json" --out "$TMP/read" --set train.steps=3 --set train.optimizer.beta1=0.8
check '[ "$RC" = 0 ] && ! grep -q "not read by this" "$TMP/err"' "adamw's own beta1 was called unread: $ERR"
# --zero without mpirun (probe 8: accepted without a word) trains as an ordinary run and
# says that nothing is sharded
expect 0 "--zero: one rank (not under mpirun -np N with N > 1), so the optimizer moments are not sharded" \
    "$BIN" train "$TMP/kl.json" --out "$TMP/zero1" --set train.steps=3 --zero
# so are another position method's keys (probe 8: model.alibi_heads in a rope run trained
# without a word); the method's own keys, and the defaults, are not named
expect 0 "so without effect: model.alibi_heads 1, model.t5_buckets 8, model.fire.hidden 8" \
    "$BIN" train "$TMP/kl.json" --out "$TMP/unread_pos" --set train.steps=3 --set model.pos=rope \
    --set model.alibi_heads=1 --set model.rope_base=500 --set model.t5_buckets=8 --set model.fire.hidden=8
for m in "pos=alibi --set model.alibi_heads=1" "pos=xpos --set model.rope_base=500" \
         "pos=fire --set model.fire.c=0.5" "pos=alibi_rf --set model.rf.kind=gaussian --set model.alibi_max_bias=4"; do
    run "$BIN" train "$TMP/kl.json" --out "$TMP/read_pos" --force --set train.steps=3 --set model.$m
    check '[ "$RC" = 0 ] && ! grep -q "not read by this" "$TMP/err"' "model.$m: its own key was called unread: $ERR"
done

# ---- train.patience (early stopping): a learning rate of 1e-30 leaves the weights as they
# are, so the validation loss never goes below step 2's: validations at 4, 6, 8 do not
# improve and patience 3 stops at step 8 with a checkpoint; a resume has nothing to train;
# one interrupted at step 5 stops where the uninterrupted run did; raising patience with
# --set goes on ----
PT=(--set train.steps=40 --set train.eval_every=2 --set train.patience=3 --set train.optimizer.lr=1e-30)
expect 0 "train.patience 3: no lower validation loss than" "$BIN" train "$TMP/kl.json" --out "$TMP/pat" "${PT[@]}"
check '[ "$(cat "$TMP/pat/checkpoints/latest")" = step_00000008.ckpt ] && [ -s "$TMP/pat/checkpoints/best.ckpt" ]' \
    "patience 3 did not stop at step 8: latest $(cat "$TMP/pat/checkpoints/latest")"
expect 0 "the run stopped early at step 8 (no lower validation loss since step 2); nothing to train" \
    "$BIN" train --resume "$TMP/pat"
check '[ "$(cat "$TMP/pat/checkpoints/latest")" = step_00000008.ckpt ]' "a resume trained past the early stop"
run "$BIN" train "$TMP/kl.json" --out "$TMP/pat2" "${PT[@]}" --quiet --stop-after 5
run "$BIN" train --resume "$TMP/pat2" --quiet
check '[ "$RC" = 0 ] && [ "$(cat "$TMP/pat2/checkpoints/latest")" = step_00000008.ckpt ]' \
    "interrupted at 5, the resumed run stopped at $(cat "$TMP/pat2/checkpoints/latest"): $ERR"
expect 0 "train.patience 5: no lower validation loss than" "$BIN" train --resume "$TMP/pat" --set train.patience=5
check '[ "$(cat "$TMP/pat/checkpoints/latest")" = step_00000012.ckpt ]' "patience 5 did not stop at step 12"
expect 2 "train.patience: counts validations, which need train.eval_every > 0" \
    "$BIN" train "$TMP/kl.json" --out "$TMP/pat3" "${PT[@]}" --set train.eval_every=0
check '[ ! -e "$TMP/pat3" ]' "a refused config left a run directory"

rm -rf "$TMP"
echo "cli_train: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
