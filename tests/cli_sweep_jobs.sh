#!/usr/bin/env bash
# cli_sweep_jobs.sh - `stretch sweep --jobs 2`: points run side by side in child processes
# give the tables of the one-at-a-time sweep (timing columns aside); the file's "jobs" key
# works and bad values are exit 2; a re-run skips finished points; a sweep interrupted by
# SIGINT (delivered to the whole process group, as Ctrl-C is) exits 130 and a second run
# finishes it with the same tables. A point that differs from a running one in eval.* only
# waits for it and evaluates its run, instead of training a copy on the other core.
. "$(dirname "$0")/lib_cli.sh" sweep_jobs
cat >base.json <<JSON
{"model": {"n_layers": 1, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 32, "tokens": [40000, 4000, 4000]}},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 6, "eval_every": 0, "eval_batches": 1, "threads": 1,
           "checkpoint_every": 0, "schedule": {"warmup": 1}}}
JSON
cat >sweep.json <<JSON
{"base": "base.json", "grid": {"model.pos": ["alibi", "rope", "sinusoidal"]}, "eval": {"lengths": [16, 32]}, "out": "s1"}
JSON
table() { cut -d, -f1-15 "$1/results.csv"; }
expect_rc 0 "one at a time" "$BIN" sweep sweep.json --quiet
expect_rc 0 "--jobs 2" "$BIN" sweep sweep.json --quiet --jobs 2 --out s2
expect_err "1 rank(s) x 2 job(s) at a time"
cmp -s <(table s1) <(table s2) && [ "$(wc -l <s2/results.csv)" = 7 ] && ok || bad "--jobs 2 tables differ"
expect_rc 0 "--jobs 2 again" "$BIN" sweep sweep.json --quiet --jobs 2 --out s2
[ "$(grep -c 'finished earlier, skipped' err.txt)" = 3 ] && ok || bad "finished points ran again"
sed 's/"out": "s1"/"out": "s3", "jobs": 2/' sweep.json >jobs.json
expect_rc 0 "\"jobs\": 2 in the file" "$BIN" sweep jobs.json --quiet
expect_err "x 2 job(s)"
sed 's/"out": "s1"/"out": "s4", "jobs": 0/' sweep.json >bad.json
expect_rc 2 "\"jobs\": 0" "$BIN" sweep bad.json --quiet
expect_err "bad.json: jobs: must be in \[1, [0-9]*\], got 0"
expect_rc 2 "--jobs x" "$BIN" sweep sweep.json --jobs x
expect_err "--jobs 'x': expected an integer in \[1, 1024\]"

# interrupted half-way: Ctrl-C semantics (the whole group), then resumed
sed 's/"steps": 6/"steps": 400000/' base.json >long.json
sed 's/"base.json"/"long.json"/; s/"out": "s1"/"out": "s5"/' sweep.json >long_sweep.json
# interrupt ERRFILE WAIT_FOR... -- SWEEP ARGS: start the sweep in its own group, wait until
# the files exist, send SIGINT (or $SIG) to the group (as Ctrl-C, or a hangup, does); rc =
# its exit status
interrupt() {
    local err=$1; shift
    local waits=()
    while [ "$1" != -- ]; do waits+=("$1"); shift; done
    shift
    setsid "$BIN" sweep "$@" >/dev/null 2>"$err" &
    local P=$! f ready
    for _ in $(seq 1 100); do
        ready=1
        for f in "${waits[@]}"; do [ -s "$f" ] || ready=0; done
        [ $ready = 1 ] && break
        sleep 0.2
    done
    sleep 1
    kill -"${SIG:-INT}" -- -$P
    # at most 60 s, polled: a background `sleep 60` watchdog would outlive `kill` of its
    # subshell and hold ctest's output pipe open for the full minute
    for _ in $(seq 1 600); do kill -0 $P 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- -$P 2>/dev/null
    wait $P; rc=$?
}
interrupt int.err s5/pos-alibi/metrics.jsonl s5/pos-rope/metrics.jsonl -- long_sweep.json --quiet --jobs 2
[ "$rc" = 130 ] && ok || { bad "interrupted --jobs sweep: exit $rc, expected 130"; tail -3 int.err; }
[ -s s5/pos-alibi/checkpoints/latest ] && [ -s s5/pos-rope/checkpoints/latest ] && ok || bad "no checkpoints after SIGINT"
[ ! -e s5/pos-sinusoidal ] && ok || bad "a point started after the signal"
# the interrupted points are incomplete (resumable), with the step they reached, not failed
check_interrupted() { # RESULTS_JSON
    $PY - "$1" <<'PY'
import csv, json, re, sys
runs = {r["name"]: r for r in json.load(open(sys.argv[1]))["runs"]}
for n in ("pos-alibi", "pos-rope"):
    r = runs[n]
    assert r["state"] == "incomplete", (n, r["state"], r.get("error"))
    m = re.fullmatch(r"interrupted at step (\d+) of 400000; run the sweep again to resume", r["error"])
    assert m, r["error"]
    # the step is a field too (results.json, results.csv's step column, results.md)
    assert r["step"] == int(m.group(1)), (r["step"], r["error"])
    csv_steps = {l["step"] for l in csv.DictReader(open(sys.argv[1].replace(".json", ".csv"))) if l["run"] == n}
    assert csv_steps == {m.group(1)}, csv_steps
    assert "| incomplete at %s |" % m.group(1) in open(sys.argv[1].replace(".json", ".md")).read()
assert runs["pos-sinusoidal"]["state"] == "pending" and "step" not in runs["pos-sinusoidal"], runs["pos-sinusoidal"]
PY
}
check_interrupted s5/results.json && ok || bad "interrupted --jobs points: not incomplete with their step"
# a hangup (a closed terminal or ssh session sends SIGHUP to the whole job): the same clean
# stop; before, the parent died of it and its death signal (SIGTERM) ended the children's
# clean stop at once, a second signal
sed 's/"out": "s5"/"out": "s8"/' long_sweep.json >long_sweep8.json
SIG=HUP interrupt hup.err s8/pos-alibi/metrics.jsonl s8/pos-rope/metrics.jsonl -- long_sweep8.json --quiet --jobs 2
[ "$rc" = 130 ] && ok || { bad "hung-up --jobs sweep: exit $rc, expected 130"; tail -3 hup.err; }
[ -s s8/pos-alibi/checkpoints/latest ] && [ -s s8/pos-rope/checkpoints/latest ] && ok || bad "no checkpoints after SIGHUP"
check_interrupted s8/results.json && ok || bad "hung-up --jobs points: not incomplete with their step"
# the same without --jobs (the point in this process)
sed 's/"out": "s5"/"out": "s7"/' long_sweep.json >long_sweep7.json
interrupt int7.err s7/pos-alibi/metrics.jsonl -- long_sweep7.json --quiet
[ "$rc" = 130 ] && ok || { bad "interrupted sweep: exit $rc, expected 130"; tail -3 int7.err; }
$PY - s7/results.json <<'PY' && ok || bad "interrupted point (no --jobs): not incomplete with its step"
import json, re, sys
runs = {r["name"]: r for r in json.load(open(sys.argv[1]))["runs"]}
r = runs["pos-alibi"]
assert r["state"] == "incomplete" and re.fullmatch(r"interrupted at step \d+ of 400000; run the sweep again to resume", r["error"]), r
PY

# eval-only twins under --jobs 2: "alibi-long" must not start (and train a copy) while
# "alibi" is still training in the other slot; it evaluates alibi's run once that is done
cat >twins.json <<JSON
{"base": "base.json", "set": {"train.steps": 40},
 "variants": [{"name": "alibi", "model.pos": "alibi"},
              {"name": "alibi-long", "model.pos": "alibi", "eval.lengths": [64]},
              {"name": "alibi-sliding", "model.pos": "alibi", "eval.mode": "sliding", "eval.stride": 8},
              {"name": "rope", "model.pos": "rope"}],
 "eval": {"lengths": [16, 32]}, "out": "s6"}
JSON
expect_rc 0 "eval-only twin with --jobs 2" "$BIN" sweep twins.json --quiet --jobs 2
[ ! -e s6/alibi-long/config.json ] && [ -s s6/alibi-long/eval_valid_nonoverlapping.json ] && ok \
    || bad "alibi-long trained a copy of alibi instead of evaluating its run"
grep -q '"trained_in"' s6/alibi-long/sweep_done.json && ok || bad "alibi-long's marker does not name the run it evaluated"
# a variant's eval.* keys win over the sweep's "eval" section (lengths [16, 32], nonoverlapping)
$PY - <<'PY' && ok || bad "a variant's eval keys were overridden by the sweep's eval section"
import json, sys
long = json.load(open("s6/alibi-long/eval_valid_nonoverlapping.json"))
sl = json.load(open("s6/alibi-sliding/eval_valid_sliding.json"))
ok = [r["length"] for r in long["results"]] == [64] and sl["mode"] == "sliding" and \
     all(r["stride"] == 8 for r in sl["results"]) and [r["length"] for r in sl["results"]] == [16, 32]
sys.exit(0 if ok else 1)
PY
# results.md: the sliding row says so, the header says rows may differ (probe 39)
grep -q '^| alibi-sliding | alibi \[sliding, stride 8\] |' s6/results.md && grep -q '^| alibi | alibi |' s6/results.md \
    && grep -q "nonoverlapping windows unless a row's pos says otherwise" s6/results.md && ok \
    || { bad "results.md does not mark the sliding row"; cat s6/results.md; }
expect_rc 0 "eval-only twins again" "$BIN" sweep twins.json --quiet --jobs 2
[ "$(grep -c 'finished earlier, skipped' err.txt)" = 4 ] && ok || bad "a second run of the twins sweep did not skip all 4 points"

# eval.stride without eval.mode (review 40): in the sweep's eval section it asks for
# sliding windows, as `stretch eval --stride` does; a variant's eval.stride alone is the
# stride a sliding evaluation of that run would take, and the point (nonoverlapping, the
# run's mode) is evaluated as `stretch eval RUN` evaluates it; both used to train every
# point and then fail its evaluation
cat >stride.json <<JSON
{"base": "base.json", "variants": [{"name": "a", "model.pos": "alibi"}], "eval": {"lengths": [16], "stride": 8},
 "out": "st1"}
JSON
expect_rc 0 "a sweep's eval.stride without a mode" "$BIN" sweep stride.json --quiet
$PY -c "import json,sys; r=json.load(open('st1/a/eval_valid_sliding.json')); sys.exit(r['results'][0]['stride'] != 8)" \
    && ok || bad "eval.stride 8 without a mode: not sliding with stride 8"
cat >vstride.json <<JSON
{"base": "base.json", "variants": [{"name": "a", "model.pos": "alibi", "eval.stride": 8},
                                   {"name": "b", "model.pos": "alibi", "eval.mode": "sliding"},
                                   {"name": "pi", "model.pos": "rope", "model.scaling.transform": "pi", "model.scaling.scale": 2}],
 "eval": {"lengths": [16]}, "out": "st2"}
JSON
expect_rc 0 "a variant's eval.stride alone" "$BIN" sweep vstride.json
[ -s st2/a/eval_valid_nonoverlapping.json ] && ok || bad "a variant's eval.stride alone: no nonoverlapping report"
# the default stride is L/2 per length, not "stride 0"; a point with a trained scaling and
# no flags hears nothing of --transform
grep -q '^| b | alibi \[sliding, stride L/2\] |' st2/results.md && ok || bad "default-stride row: $(grep '^| b ' st2/results.md)"
grep -q -- "--transform none" err.txt && bad "a sweep point logged a --transform none note" || ok
# a job process that cannot start (fork under a process limit, as user nobody): the sweep
# ends with the error and the unstarted points pending; it used to exit 0 with a point
# never run and the seed mean over the others
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    NB=$(mktemp -d /tmp/stretch_nproc.XXXXXX)
    chmod 777 "$NB"
    sed "s#\"cache_dir\": \"[^\"]*\"#\"cache_dir\": \"$NB/cache\"#" base.json >"$NB/base.json"
    cat >"$NB/seeds.json" <<JSON
{"base": "base.json", "grid": {"train.seed": [1, 2, 3]}, "eval": {"lengths": [16]}, "out": "o", "jobs": 2}
JSON
    chmod 666 "$NB"/*.json
    (cd "$NB" && setpriv --reuid=65534 --regid=65534 --clear-groups \
        bash -c 'ulimit -u 2; exec "$0" sweep seeds.json --quiet --threads 1' "$BIN") >/dev/null 2>err.txt; rc=$?
    [ "$rc" != 0 ] && ok || bad "a sweep whose job could not start exited 0"
    expect_err "cannot start a job process: fork: "
    grep -q '| pending |' "$NB/o/results.md" && ok || bad "the unstarted point is not pending in results.md"
    rm -rf "$NB"
fi

echo "cli_sweep_jobs: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
