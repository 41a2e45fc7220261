#!/usr/bin/env bash
# mpi_train.sh BTL - data-parallel training and sharded evaluation under `mpirun -np 2`
# (docs/distributed.md), over BTL "vader" (shared memory) or "tcp" (loopback only, the
# multi-machine transport). Exit 77 (ctest: skipped) when the build has no MPI; then only
# the refusal of a non-MPI build under a launcher is checked.
#
# Checked:
#  - equivalence: 2 ranks x batch 4 == 1 process x batch 4 x grad_accum 2 (dropout on),
#    |loss difference| <= 1e-6 at each of 50 steps with SGD + momentum, and at each of the
#    first 10 steps with AdamW (tolerance derived below), while the 1-process batch-4 run
#    without accumulation differs by > 1e-2 (so the check can fail);
#    and the same for the LLaMA-style block and for Abacus offsets (20 SGD steps each);
#  - determinism: two 2-rank runs write bit-identical loss traces;
#  - resume: --stop-after 20 + --resume with 2 ranks == the uninterrupted run, bit for bit,
#    also when rank 1 cannot see the run dir; resuming with 1 process is exit 5, and a
#    1-process run under 2 ranks, each message giving the command that works;
#  - ZeRO-1 (--zero): the same trace bit for bit, also across a resume;
#  - eval: `mpirun -np 2 stretch eval` prints and writes the one-process figures exactly
#    (nonoverlapping with buckets, sliding); --attn-stats within float rounding of one process;
#  - stopping: SIGTERM to rank 1 stops both ranks (exit 130) with a loadable checkpoint,
#    no process left, and the hint to continue under mpirun -np 2; a config that differs on rank 1 (MPMD launch) fails both ranks with
#    exit 2, and so does a --stop-after or --zero given to one rank only; a config missing
#    on rank 1 aborts the job (exit 3), no hang (timeouts);
#  - extend under 2 ranks, and of a 2-rank run: --budget counts every rank's tokens;
#  - restart: a 2-rank run without a checkpoint restarts from step 0 on both ranks (also
#    with train.steps 0: its initial checkpoint);
#  - SIGKILL of rank 1, then of rank 0: mpirun ends the job within 60 s, no rank is left,
#    the last checkpoint loads and resumes with 2 ranks.
#
# Tolerance: both runs compute the same sums; only the order in which the two micro-batch
# gradients meet differs (one process adds micro-batch 2 into the gradient buffer inside
# each BLAS call, sgemm with beta = 1; two ranks add two finished buffers). A gradient
# element then differs by at most ~K u relative (u = 2^-24, K <= 64 = B*T terms per
# element): <= 4e-6 relative, on per-element gradients of ~1e-2 (norm ~1 over 26k
# parameters). SGD is linear in the gradient: after t = 50 steps at lr 0.3 the parameters
# differ by <= t lr 4e-6 1e-2 = 6e-7 per element... summed in quadrature over 26k
# elements and multiplied by the gradient norm (~1), the loss moves by < 1e-7, below the
# float32 rounding of the loss itself (1 ulp = 2.4e-7 at 3.5). Tolerance: 1e-6 (4 ulps).
# Observed: 0 or 1 ulp. AdamW's update m / (sqrt(v) + eps) is not Lipschitz in g where v
# is small, so a 1-ulp difference grows (measured: x2 every ~3 steps at lr 0.01, 2e-4 by
# step 45 on this model): there the bound holds only before the growth, checked on the
# first 10 steps; whole AdamW runs are compared bit for bit (same N) instead.
. "$(dirname "$0")/lib_cli.sh" mpi_train
BTL=${1:-vader}

if [ "${STRETCH_MPI:-0}" != 1 ]; then
    # a build without MPI must not run N silent copies under a launcher
    expect_rc 2 "non-MPI build under a launcher" env OMPI_COMM_WORLD_SIZE=2 "$BIN" train x.json
    expect_err "built without MPI"
    echo "mpi_train: the build has no MPI (STRETCH_MPI=OFF): skipped ($passes checks of the refusal passed)"
    [ "$fails" -eq 0 ] && exit 77 || exit 1
fi
MPIRUN=${STRETCH_MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# The BTL is what the point-to-point layer ob1 sends through, so ob1 is named: under
# another layer (cm and its MTLs, which Debian's openmpi-mca-params.conf leaves open) the
# --mca btl choice would not apply. Naming it also spares each launch the probing of the
# others (0.6 -> 0.4 s per mpirun here, 36 launches in this test).
case "$BTL" in
    vader) NET=(--mca pml ob1 --mca btl self,vader) ;;
    tcp)   NET=(--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo) ;;
    *) echo "mpi_train: unknown BTL $BTL"; exit 2 ;;
esac
MPI=("$MPIRUN" -np 2 --oversubscribe --bind-to none "${NET[@]}" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY)
export OMP_WAIT_POLICY=PASSIVE

cat >tiny.json <<JSON
{
  "model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi", "dropout_resid": 0.1},
  "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 32, "tokens": [40000, 4000, 4000]}},
  "train": {"batch_size": 4, "seq_len": 16, "steps": 50, "log_every": 1, "eval_every": 25, "eval_batches": 3,
            "checkpoint_every": 10, "threads": 1, "optimizer": {"lr": 0.01}, "schedule": {"warmup": 5}}
}
JSON
losses() { grep '"loss"' "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
maxdiff() { paste <(losses "$1") <(losses "$2") | awk 'BEGIN{m=0; n=0} {d=$1-$2; if (d<0) d=-d; if (d>m) m=d; n++} END{printf "%.3g %d\n", m, n}'; }

# ---- equivalence, determinism ----
SGD=(--set train.optimizer.name=sgd --set train.optimizer.lr=0.3 --set train.optimizer.momentum=0.9)
equiv() {   # equiv LABEL TOL STEPS SETS...: 2 ranks vs grad_accum 2, and the control
    local label=$1 tol=$2 steps=$3; shift 3
    expect_rc 0 "2 ranks ($label)" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out "q2$label" --quiet \
        --set train.steps="$steps" "$@"
    expect_rc 0 "1 process, grad_accum 2 ($label)" "$BIN" train tiny.json --out "q1$label" --quiet \
        --set train.steps="$steps" --set train.grad_accum=2 "$@"
    expect_rc 0 "1 process, batch 4 only ($label)" "$BIN" train tiny.json --out "qx$label" --quiet \
        --set train.steps="$steps" "$@"
    read -r d n <<<"$(maxdiff "q2$label" "q1$label")"
    read -r dx nx <<<"$(maxdiff "q2$label" "qx$label")"
    echo "$label: 2 ranks vs grad_accum 2: max |loss difference| $d over $n steps (tolerance $tol);" \
         "vs batch 4 without accumulation: $dx"
    [ "$n" = "$steps" ] && awk "BEGIN{exit !($d <= $tol)}" && ok || bad "$label: 2 ranks vs grad_accum 2: $d over $n steps"
    awk "BEGIN{exit !($dx > 1e-2)}" && ok || bad "$label: the equivalence check cannot fail: $dx"
}
equiv sgd 1e-6 50 "${SGD[@]}"
equiv adamw 1e-6 10
# the LLaMA-style block (RMSNorm, SwiGLU, no biases, q/k norm, grouped-query heads: the
# shared K/V heads' gradients are summed per rank, then across ranks). At lr 0.3 this block
# diverges slowly here (the loss climbs from 3.47 to 3.6 in 20 steps) and 1-ulp differences
# grow with it (7e-5 by step 20, measured); at lr 0.1 it trains and the bound holds
equiv llama-sgd 1e-6 20 "${SGD[@]}" --set train.optimizer.lr=0.1 --set model.norm=rmsnorm --set model.ffn=swiglu \
    --set model.bias=false --set model.qk_norm=rmsnorm --set model.n_kv_heads=2
# Abacus offsets (train.abacus_max_k) are drawn per micro-batch from its window index, so
# rank r's micro-batch takes the offset of the one process's micro-batch r (ids 0..9 of the
# synthetic vocabulary serve as the digits)
equiv abacus-sgd 1e-6 20 "${SGD[@]}" --set model.abacus.rows=64 --set model.abacus.digit0=0 \
    --set train.abacus_max_k=20
expect_rc 0 "2 ranks" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out r2 --quiet
expect_rc 0 "2 ranks again" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out r2b --quiet
cmp -s <(losses r2) <(losses r2b) && ok || bad "two 2-rank runs differ"
expect_rc 0 "2 ranks, not quiet" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out r2c --stop-after 2
[ "$(grep -c 'data: synthetic Markov source' err.txt)" = 1 ] && ok || bad "the data line was logged by every rank"
cmp -s <(grep val_loss r2/metrics.jsonl) <(grep val_loss r2b/metrics.jsonl) && ok || bad "validation differs"
[ ! -e r2/metrics.jsonl.1 ] && [ "$(grep -c '"step": 50' r2/metrics.jsonl)" = 2 ] && ok || bad "metrics.jsonl written twice?"

# ---- resume with the same N: bit-exact; another N: exit 5 ----
expect_rc 0 "2 ranks, stop after 20" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out rs --quiet --stop-after 20
expect_rc 5 "resume with 1 process" "$BIN" train --resume rs --quiet
expect_err "written by a run of 2 rank(s), this run has 1: resume with mpirun -np 2 stretch train --resume rs "
expect_rc 5 "resume of a 1-process run with 2 ranks" timeout 120 "${MPI[@]}" "$BIN" train --resume q1sgd --quiet
expect_err "written by a run of 1 rank(s), this run has 2: resume with stretch train --resume q1sgd "
expect_rc 0 "2 ranks, resume" timeout 300 "${MPI[@]}" "$BIN" train --resume rs --quiet
cmp -s <(losses r2) <(losses rs) && ok || bad "resumed 2-rank trace differs from the uninterrupted one"
# a 2-rank run that died before its first checkpoint restarts from step 0 on both ranks
# (rank 0 alone sees the run dir; the others must take its decision): the trace of the
# uninterrupted run, and with train.steps 0 the initial checkpoint (the ranks once disagreed:
# rank 1 ran the training loop while rank 0 wrote the initial checkpoint)
expect_rc 0 "2 ranks, a run to restart" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out rr --quiet --stop-after 10
rm -f rr/checkpoints/*
expect_rc 0 "2 ranks, resume without a checkpoint" timeout 300 "${MPI[@]}" "$BIN" train --resume rr
expect_err "no checkpoint yet; training from step 0"
cmp -s <(losses r2) <(losses rr) && ok || bad "the restarted 2-rank trace differs from the uninterrupted one"
expect_rc 0 "2 ranks, steps 0" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out r0 --quiet --set train.steps=0
rm -f r0/checkpoints/*
expect_rc 0 "2 ranks, resume of steps 0 without a checkpoint" timeout 120 "${MPI[@]}" "$BIN" train --resume r0 --quiet
[ -e r0/checkpoints/latest ] && ok || bad "the restarted steps-0 run wrote no initial checkpoint"
# ZeRO-1: the moments sharded, the same bits; its checkpoints resume with or without it
expect_rc 0 "2 ranks, --zero" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out rz --zero
expect_err "ZeRO-1: optimizer moments sharded"
cmp -s <(losses r2) <(losses rz) && cmp -s <(grep val_loss r2/metrics.jsonl) <(grep val_loss rz/metrics.jsonl) \
    && ok || bad "--zero changed the trace"
expect_rc 0 "2 ranks, --zero, stop after 20" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out rzs --zero --quiet \
    --stop-after 20
expect_rc 0 "resume a ZeRO checkpoint with --zero" timeout 300 "${MPI[@]}" "$BIN" train --resume rzs --zero --quiet
cmp -s <(losses r2) <(losses rzs) && ok || bad "resumed --zero run differs"
# a rank on another machine need not see the run dir: rank 0 sends it the config and state
expect_rc 0 "2 ranks, stop after 20 (rt)" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out rt --quiet --stop-after 20
expect_rc 0 "resume, the run dir on rank 0 only" timeout 300 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" train --resume rt --quiet : -np 1 "$BIN" train --resume elsewhere/rt --quiet
cmp -s <(losses r2) <(losses rt) && ok || bad "resume with the run dir on rank 0 only differs"
[ ! -e elsewhere ] && ok || bad "rank 1 created a run dir"

# ---- eval: exactly the one-process figures ----
same_eval() {   # same_eval A.json B.json: every field but timings and memory
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
drop = {"seconds", "tokens_per_s", "peak_rss_mb"}
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ra = [{k: v for k, v in r.items() if k not in drop} for r in a["results"]]
rb = [{k: v for k, v in r.items() if k not in drop} for r in b["results"]]
sys.exit(0 if ra == rb and len(ra) > 0 else 1)
PYEOF
}
for mode in "--buckets 4" "--mode sliding --batch-tokens 64"; do
    expect_rc 0 "eval, 1 process ($mode)" "$BIN" eval r2 --lengths 16,32,100 $mode --json e1.json --force --quiet
    grep -v "elapsed\|^ *[0-9]" out.txt >e1.head; awk '/^ *[0-9]/{print $1,$2,$3,$4,$5,$6}' out.txt >e1.rows
    expect_rc 0 "eval, 2 ranks ($mode)" timeout 300 "${MPI[@]}" "$BIN" eval r2 --lengths 16,32,100 $mode --json e2.json --force --quiet
    awk '/^ *[0-9]/{print $1,$2,$3,$4,$5,$6}' out.txt >e2.rows
    cmp -s e1.rows e2.rows && [ -s e1.rows ] && ok || bad "eval table differs ($mode)"
    same_eval e1.json e2.json && ok || bad "eval JSON differs ($mode)"
done
# attention statistics: the ranks' sums added up, within float rounding of one process
expect_rc 0 "eval --attn-stats, 1 process" "$BIN" eval r2 --lengths 16,100 --attn-stats --json a1.json --force --quiet
expect_rc 0 "eval --attn-stats, 2 ranks" timeout 300 "${MPI[@]}" "$BIN" eval r2 --lengths 16,100 --attn-stats --json a2.json --force --quiet
"$PY" - a1.json a2.json <<'PYEOF' && ok || bad "attention statistics under 2 ranks"
import json, sys
a, b = (json.load(open(p))["results"] for p in sys.argv[1:3])
assert [r["loss"] for r in a] == [r["loss"] for r in b]
for ra, rb in zip(a, b):
    for k in ("distance", "entropy", "first", "far"):
        for la, lb in zip(ra["attention"][k], rb["attention"][k]):
            for x, y in zip(la, lb):
                assert abs(x - y) <= 1e-9 * (1 + abs(x)), (k, x, y)
PYEOF
# ranks that load different checkpoints (beside a training, `latest` read at two moments;
# here an MPMD launch names two runs) are refused, not mixed into one figure
expect_rc 5 "eval, ranks on different checkpoints" timeout 120 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" eval r2 --lengths 16 --json em.json --force --quiet : -np 1 "$BIN" eval rz --lengths 16 --json em.json --force --quiet
expect_err "the ranks loaded different checkpoints"
grep -q "MPI_ABORT" err.txt && bad "the refusal of two checkpoints aborted the job" || ok
[ ! -e em.json ] && ok || bad "a report was written from two checkpoints"
# rank 0 refuses an existing --json before evaluating: every rank stops with it (no abort, no hang)
e2sum=$(md5sum <e2.json)
expect_rc 3 "eval --json over a file, 2 ranks" timeout 120 "${MPI[@]}" "$BIN" eval r2 --lengths 16 --json e2.json --quiet
grep -q -- "--json e2.json: the file exists" err.txt && ok || bad "2-rank refusal lacks its message: $(head -3 err.txt)"
grep -q "MPI_ABORT" err.txt && bad "2-rank refusal aborted the job" || ok
[ "$(md5sum <e2.json)" = "$e2sum" ] && ok || bad "e2.json changed"

# ---- stopping: a signal on one rank, failures on one rank; never a hang ----
# watchdog SECONDS CMD...: run CMD after SECONDS unless `kill $WD` comes first. The sleep
# is killed with it and writes nowhere: a sleep left holding this script's stdout kept
# ctest (which reads the test's output to its end) waiting 45 s after the test ended.
watchdog() {
    local s=$1; shift
    ( trap 'kill $! 2>/dev/null; exit 0' TERM; sleep "$s" & wait $!; "$@" ) >/dev/null 2>&1 &
    WD=$!
}
kill_run() { kill -KILL $MP; pkill -KILL -f "^[^ ]*stretch train tiny.json --out $1 "; }
# rank_pid RUN R: the pid of rank R of the 2-rank training into RUN, told by the rank
# OpenMPI puts in each process's environment (pid order is no guide: pids wrap at
# pid_max, 32768 here, and a wrap between the forks put mpirun's pid above the ranks');
# the pattern is anchored at the binary so mpirun's own command line does not match
rank_pid() {
    local p
    for p in $(pgrep -f "^[^ ]*stretch train tiny.json --out $1 "); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
    done
}
"${MPI[@]}" "$BIN" train tiny.json --out rsig --quiet --set train.steps=1000000 --set train.checkpoint_every=0 \
    >sig.out 2>sig.err &
MP=$!
for _ in $(seq 1 100); do [ -s rsig/checkpoints/latest ] || [ -s rsig/metrics.jsonl ] && break; sleep 0.2; done
sleep 1
R1=$(rank_pid rsig 1)
[ -n "$R1" ] && ok || bad "SIGTERM on rank 1: no rank 1 process found"
[ -n "$R1" ] && kill -TERM "$R1"
watchdog 60 kill -KILL $MP
wait $MP; rc=$?
kill $WD 2>/dev/null
[ "$rc" = 130 ] && ok || { bad "SIGTERM on rank 1: mpirun exit $rc, expected 130"; tail -5 sig.err; }
grep -q "interrupted by SIGTERM" sig.err && ok || bad "no interruption message"
grep -q "continue with: mpirun -np 2 stretch train --resume rsig$" sig.err && ok || bad "the hint lacks mpirun -np 2: $(grep interrupted sig.err)"
pgrep -f "out rsig" >/dev/null && bad "ranks left running" || ok
expect_rc 0 "the interrupted run's checkpoint loads" "$BIN" eval rsig --lengths 16 --json rsig.json --quiet

# SIGKILL on one rank (no handler can run): the survivors must not hang in a collective;
# mpirun sees the death and ends them within a bounded time (watchdog 60 s, measured ~2 s),
# and the last periodic checkpoint (written atomically) loads and resumes with 2 ranks.
# Rank 1 (a reader) and rank 0 (the writer, possibly mid-write) in turn.
for victim in 1 0; do
    rk=rkill$victim
    "${MPI[@]}" "$BIN" train tiny.json --out $rk --quiet --set train.steps=1000000 --set train.checkpoint_every=7 \
        >$rk.out 2>$rk.err &
    MP=$!
    for _ in $(seq 1 150); do ls $rk/checkpoints/step_*.ckpt >/dev/null 2>&1 && break; sleep 0.2; done
    sleep 0.5
    PIDS=($(rank_pid $rk 0) $(rank_pid $rk 1))
    [ ${#PIDS[@]} = 2 ] && ok || bad "SIGKILL rank $victim: ${#PIDS[@]} rank processes found"
    t0=$(date +%s)
    [ ${#PIDS[@]} = 2 ] && kill -KILL "${PIDS[$victim]}"
    watchdog 60 kill_run $rk
    wait $MP; rc=$?
    kill $WD 2>/dev/null
    t1=$(date +%s)
    [ "$rc" != 0 ] && [ $((t1 - t0)) -lt 60 ] && ok || bad "SIGKILL rank $victim: mpirun exit $rc after $((t1 - t0)) s"
    sleep 0.5
    pgrep -f "^[^ ]*stretch train tiny.json --out $rk " >/dev/null && bad "SIGKILL rank $victim: ranks left running" || ok
    expect_rc 0 "SIGKILL rank $victim: the last checkpoint loads" "$BIN" eval $rk --lengths 16 --json $rk.json --quiet
    last=$(ls $rk/checkpoints/step_*.ckpt 2>/dev/null | sed 's/.*step_0*\([0-9]*\)\.ckpt/\1/' | sort -n | tail -1)
    expect_rc 0 "SIGKILL rank $victim: resume from step $last" timeout 300 "${MPI[@]}" "$BIN" train --resume $rk --quiet \
        --stop-after $((last + 2))
done

sed 's/"seq_len": 16/"seq_len": 8/' tiny.json >other.json
expect_rc 2 "rank 1 has another config" timeout 120 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" train tiny.json --out rm --quiet : -np 1 "$BIN" train other.json --out rm --quiet
expect_err "config differs from rank 0's (train.seq_len"
[ ! -e rm/checkpoints/latest ] && ok || bad "a failed start wrote a checkpoint"
# a flag given to one rank only: refused by both (they waited in a collective for ever)
expect_rc 2 "--stop-after on rank 0 only" timeout 120 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" train tiny.json --out rf --quiet --stop-after 15 : -np 1 "$BIN" train tiny.json --out rf --quiet
expect_err "rank 1: --stop-after differs from rank 0's (15 on rank 0, 0 here)"
expect_rc 2 "--zero on rank 1 only" timeout 120 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" train tiny.json --out rf --quiet : -np 1 "$BIN" train tiny.json --out rf --quiet --zero
expect_err "rank 1: --zero differs"
[ ! -e rf ] && ok || bad "a refused start left rf"
expect_rc 3 "config missing on rank 1" timeout 120 "$MPIRUN" --oversubscribe --bind-to none "${NET[@]}" \
    -np 1 "$BIN" train tiny.json --out rn --quiet : -np 1 "$BIN" train missing.json --out rn --quiet
expect_err "missing.json"
expect_rc 2 "generate refuses 2 ranks" timeout 120 "${MPI[@]}" "$BIN" generate r2 --tokens 4
expect_err "runs in one process"

# ---- extend: data-parallel; --budget counts every rank's tokens on both sides ----
expect_rc 0 "1-process base" "$BIN" train tiny.json --out eb1 --quiet --set train.steps=20 --set model.dropout_resid=0
expect_rc 0 "2-rank extend of a 1-process run" timeout 300 "${MPI[@]}" "$BIN" extend eb1 --to 32 --budget 1.0 --out ee12
expect_err "10 steps of 2 x 32 tokens x 2 ranks (100.0% of the base run's tokens)"
[ "$(grep -c 'extending' err.txt)" = 1 ] && ok || bad "the extend header was printed by more than rank 0"
expect_rc 0 "1-process extend of a 2-rank run" "$BIN" extend r2 --to 32 --budget 0.5 --out ee21
expect_err "50 steps of 2 x 32 tokens (50.0% of the base run's tokens)"

# ---- sweep: one run per rank, the tables of a one-process sweep ----
cat >sweep.json <<JSON
{"base": "tiny.json", "set": {"train.steps": 6, "train.eval_every": 0, "train.checkpoint_every": 0},
 "grid": {"model.pos": ["alibi", "rope", "sinusoidal"]}, "eval": {"lengths": [16, 32]}, "out": "sw1"}
JSON
table() { cut -d, -f1-15 "$1/results.csv"; }   # without the timing and memory columns
expect_rc 0 "sweep, 1 process" "$BIN" sweep sweep.json --quiet --threads 1
expect_rc 0 "sweep, 2 ranks" timeout 300 "${MPI[@]}" "$BIN" sweep sweep.json --quiet --threads 1 --out sw2
cmp -s <(table sw1) <(table sw2) && [ "$(wc -l <sw2/results.csv)" = 7 ] && ok || bad "2-rank sweep tables differ"
expect_rc 0 "sweep, 2 ranks, again" timeout 300 "${MPI[@]}" "$BIN" sweep sweep.json --quiet --threads 1 --out sw2
[ "$(grep -c 'finished earlier, skipped' err.txt)" = 3 ] && ok || bad "a finished 2-rank sweep ran again"

# ---- train.patience: every rank sees the same validation loss, so 2 ranks stop together,
# at the step one process with grad_accum 2 stops at (lr 1e-30: no validation improves
# on the first, patience 2 stops at the second after it) ----
PAT=(--set train.steps=60 --set train.eval_every=4 --set train.patience=2 --set train.optimizer.lr=1e-30 --quiet)
expect_rc 0 "patience, 2 ranks" timeout 300 "${MPI[@]}" "$BIN" train tiny.json --out pat2 "${PAT[@]}"
expect_rc 0 "patience, 1 process" "$BIN" train tiny.json --out pat1 "${PAT[@]}" --set train.grad_accum=2
[ "$(cat pat2/checkpoints/latest)" = step_00000012.ckpt ] && [ "$(cat pat1/checkpoints/latest)" = step_00000012.ckpt ] \
    && ok || bad "patience: stopped at $(cat pat2/checkpoints/latest) (2 ranks), $(cat pat1/checkpoints/latest) (1)"

echo "mpi_train ($BTL): $passes passed, $fails failed"
[ "$fails" -eq 0 ]
