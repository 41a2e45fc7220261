#!/usr/bin/env bash
# cli_robust.sh - a run directory survives what a machine does to it (a second probe's
# findings): one writer at a time, whole metrics records, limits that fail as errors,
# interruptions that are never lost, and leftovers that are cleaned:
#   lock       a resume of a run another process is training, a second fresh train into
#              it, a second sweep into a sweep's out: exit 3 "in use by another stretch
#              process", the first finishes with a trace identical to a lone run's
#   limits     a file-size limit (ulimit -f) makes metrics.jsonl's write fail: exit 3
#              naming it, every line of it one whole JSON record; a limit a checkpoint
#              exceeds is exit 3 naming the checkpoint (not SIGXFSZ), no temp file left
#   restart    --resume of a run that wrote no checkpoint trains from step 0 and ends
#              with the trace of an uninterrupted run
#   temps      --force and --resume remove a dead writer's temp files beside the run's
#              files (config.json.tmp.PID.NONCE, ...), never a user's file
#   signal     SIGTERM at any moment of a run whose last checkpoint takes a while: once the
#              signal was delivered the exit is never 0 (a sweep would go on otherwise)
. "$(dirname "$0")/lib_cli.sh" cli_robust
TO=120
run_to() { local want=$1 what=$2; shift 2; expect_rc "$want" "$what" timeout -k 5 "$TO" "$@"; }
trace() { "$PY" - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line); d.pop("tokens_per_s", None); d.pop("elapsed", None)
    print(json.dumps(d, sort_keys=True))
EOF
}
tiny_synthetic_cfg tiny.json
LONG=(--set train.steps=4000 --set train.log_every=50 --set train.eval_every=1000 --set train.checkpoint_every=1000)
run_to 0 "reference run" "$BIN" train tiny.json "${LONG[@]}" --out ref --quiet
trace ref/metrics.jsonl > ref.trace

# ---- lock ----
"$BIN" train tiny.json "${LONG[@]}" --out busy --quiet 2>busy.err & P=$!
for _ in $(seq 100); do [ -s busy/config.json ] && break; sleep 0.05; done
if kill -0 $P 2>/dev/null; then
    run_to 3 "resume of a run being trained" "$BIN" train --resume busy --quiet
    expect_err "busy: in use by another stretch process"
    run_to 3 "fresh train into a run being trained (--force)" "$BIN" train tiny.json --out busy --force --quiet
    expect_err "busy: in use by another stretch process"
else
    bad "the 4000-step run ended before the lock could be tried (raise train.steps)"
fi
wait $P && ok || bad "the locked run failed: $(cat busy.err)"
trace busy/metrics.jsonl > busy.trace
cmp -s ref.trace busy.trace && ok || bad "the locked run's trace differs from a lone run's"
cp tiny.json base.json
printf '{"base": "base.json", "set": {"train.steps": 3000}, "variants": [{"name": "a", "model.pos": "alibi"}], "eval": {"lengths": [16]}, "out": "sw"}' > sw.json
"$BIN" sweep sw.json --quiet 2>sw.err & P=$!
for _ in $(seq 100); do [ -d sw/a ] && break; sleep 0.05; done
run_to 3 "a second sweep into the same out" "$BIN" sweep sw.json --quiet
expect_err "sw: in use by another stretch process"
wait $P && ok || bad "the first sweep failed: $(cat sw.err)"

# ---- limits ----
(ulimit -f 64; exec "$BIN" train tiny.json --set train.steps=3000 --set train.log_every=1 --set train.eval_every=0 \
    --set train.checkpoint_every=0 --out lim --quiet) >/dev/null 2>lim.err
rc=$?
[ "$rc" = 3 ] && ok || bad "metrics.jsonl over the file-size limit: exit $rc, expected 3: $(cat lim.err)"
grep -q "lim/metrics.jsonl: write failed" lim.err && ok || bad "the limit's message does not name metrics.jsonl: $(cat lim.err)"
"$PY" -c "
import json, sys
data = open('lim/metrics.jsonl').read()
assert data.endswith('\n'), 'a partial last line'
[json.loads(l) for l in data.splitlines()]
" 2>/dev/null && ok || bad "lim/metrics.jsonl holds a partial or torn record"
(ulimit -f 16; exec "$BIN" train tiny.json --set model.d_model=64 --out lim2 --quiet) >/dev/null 2>lim2.err
rc=$?
[ "$rc" = 3 ] && ok || bad "a checkpoint over the file-size limit: exit $rc, expected 3 (153: killed by SIGXFSZ)"
grep -q "step_00000002.ckpt" lim2.err && ok || bad "the limit's message does not name the checkpoint: $(cat lim2.err)"
[ -z "$(find lim2 -name '*.tmp.*')" ] && ok || bad "a temp file is left: $(find lim2 -name '*.tmp.*')"

# ---- restart ----
run_to 0 "a run" "$BIN" train tiny.json "${LONG[@]}" --out nock --quiet
rm -f nock/checkpoints/*    # as if it had died before its first checkpoint
echo '{"step": 5, "loss": 1.0}' >> nock/metrics.jsonl
run_to 0 "resume without a checkpoint" "$BIN" train --resume nock
expect_err "no checkpoint yet; training from step 0"
trace nock/metrics.jsonl > nock.trace
cmp -s ref.trace nock.trace && ok || bad "the restarted run's trace differs from an uninterrupted run's"

# ---- temps ----
run_to 0 "a run" "$BIN" train tiny.json --out tmps --quiet
for n in config.json tokenizer.json metrics.jsonl; do echo x > tmps/$n.tmp.999999999.abcdef; done
echo mine > tmps/notes.tmp.999999999; echo x > tmps/eval_valid_nonoverlapping.json.tmp.999999999.abcdef
run_to 0 "resume" "$BIN" train --resume tmps --set train.steps=4 --quiet
[ -z "$(find tmps -maxdepth 1 -name '*.json*.tmp.*' -o -maxdepth 1 -name 'metrics.jsonl.tmp.*')" ] && ok \
    || bad "resume left the run's temp files: $(ls tmps)"
[ -f tmps/notes.tmp.999999999 ] && ok || bad "resume removed a user's file"
echo x > tmps/config.json.tmp.999999999.abcdef
run_to 0 "--force" "$BIN" train tiny.json --out tmps --force --quiet
[ ! -e tmps/config.json.tmp.999999999.abcdef ] && ok || bad "--force left config.json's temp file"
[ -f tmps/notes.tmp.999999999 ] && ok || bad "--force removed a user's file"

# ---- signal ----
# the last checkpoint of this model takes a while to write; SIGTERM lands at spread moments
hit=0
for d in 0.3 0.45 0.6 0.75 0.9 1.05 1.2 1.4; do
    rm -rf sig
    "$BIN" train tiny.json --set model.d_model=512 --set model.n_layers=2 --set train.steps=1 \
        --set train.eval_batches=0 --out sig --quiet >/dev/null 2>sig.err & P=$!
    sleep $d
    # stopped first, so that it cannot exit between the look and the signal: a process that
    # had already exited (a zombie not yet reaped) also accepts kill, and its exit 0 is
    # then no failure
    if kill -STOP $P 2>/dev/null && [ "$(awk '{print $3}' /proc/$P/stat 2>/dev/null)" = T ]; then
        kill -TERM $P; kill -CONT $P
        wait $P; rc=$?
        hit=$((hit + 1))
        [ "$rc" -ne 0 ] && ok || bad "SIGTERM at ${d}s was delivered but the run exited 0: $(cat sig.err)"
    else
        kill -CONT $P 2>/dev/null
        wait $P
    fi
done
[ "$hit" -gt 0 ] && ok || bad "no SIGTERM reached a running process (the model trains too fast)"

finish cli_robust
