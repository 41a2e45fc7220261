#!/usr/bin/env bash
# cli_probe7.sh - the findings of the seventh round of black-box probes (do the documented
# numerical claims hold?) that are not checked beside their feature's own tests:
#   - gradient accumulation on a task (answer-only loss: micro-batches keep different
#     numbers of targets): batch B x grad_accum k is the update of one batch of B k rows
#     ("effective batch B * grad_accum", the loss "the mean over answer tokens"), to float
#     rounding. Each micro-batch's mean loss was weighted 1/k whatever its count: the losses
#     and gradient norms of the first steps differed by 6e-4 to 7e-2 relative (N MPI ranks
#     likewise against one process of N times the batch). Text runs keep their bits (checked
#     by the control).
#     Validation likewise: the mean over the answer tokens of all its batches, so 4 batches
#     of 4 rows score as 2 batches of the same 8 (it was the mean of the batch means).
#   - configs/README.md said cosine, linear and wsd stay at lr_min past s = steps "(a
#     resumed run given more steps)"; such a resume re-plans the curve over the new
#     train.steps (as the wsd note said), so a finished cosine run goes back up: the docs
#     say so now, and metrics.jsonl's lr after the resume follows the new curve.
#   - docs/model-format.md wrote N(0, init_std) with a standard deviation and, in the same
#     sentence, FIRE's N(0, 1/3), N(0, 1/(3K)) with variances (the export has std 0.577,
#     not 0.333): the docs say which is which now.
#   - extend's default --batch is the base run's batch_size x seq_len / N with its grad_accum
#     kept (an update then holds about the base's tokens); docs/extension.md and extend
#     --help said "tokens per step / N", which with grad_accum 3 reads as 3x that batch.
#   - README's list of the methods whose generate cache slides past --context left out fox,
#     which slides (its cached text differs from --no-cache's re-run there, as alibi's does).
#   - train.nonfinite skip on weights that overflow every forward skipped every later step
#     and exited 0; train.nonfinite_limit (100) updates skipped in a row now stop it (exit 7).
. "$(dirname "$0")/lib_cli.sh" cli_probe7

# compare_steps WHAT A B STEPS TOL: the loss and grad_norm of the first STEPS records of two
# runs agree within TOL relative (AdamW amplifies rounding later: docs/distributed.md)
compare_steps() {
    local d
    d=$("$PY" - "$2" "$3" "$4" <<'EOF'
import json, sys
def recs(d): return [json.loads(l) for l in open(d + '/metrics.jsonl') if '"loss"' in l]
a, b, n = recs(sys.argv[1]), recs(sys.argv[2]), int(sys.argv[3])
if len(a) < n or len(b) < n: print('missing'); sys.exit()
print(max(max(abs(x[k] - y[k]) / abs(y[k]) for k in ('loss', 'grad_norm')) for x, y in zip(a[:n], b[:n])))
EOF
)
    [[ $d =~ ^[0-9.eE+-]+$ ]] && awk "BEGIN{exit !($d <= $5)}" && ok || bad "$1: relative difference $d (tolerance $5)"
}

# ---- gradient accumulation: B x k equals one batch of B k rows, on a task too ----
cat > task.json <<'JSON'
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "mqar", "min_size": 1, "max_size": 4, "symbols": 32}},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 64, "steps": 6, "threads": 1, "log_every": 1,
           "optimizer": {"name": "adamw", "lr": 0.003}, "schedule": {"kind": "cosine", "warmup": 2},
           "eval_every": 0, "eval_batches": 0, "checkpoint_every": 0},
 "eval": {"lengths": [64]}}
JSON
expect_rc 0 "task: batch 4 x grad_accum 2" "$BIN" train task.json --out acc --quiet --set train.grad_accum=2
expect_rc 0 "task: batch 8" "$BIN" train task.json --out b8 --quiet --set train.batch_size=8
compare_steps "task: batch 4 x grad_accum 2 vs batch 8" acc b8 3 1e-6
# validation of the same initial weights over the same 16 rows, as 4 x 4 and as 2 x 8
expect_rc 0 "task: step 0, validation 4 x 4" "$BIN" train task.json --out v4 --quiet --set train.steps=0 --set train.eval_batches=4
expect_rc 0 "task: step 0, validation 2 x 8" "$BIN" train task.json --out v8 --quiet --set train.steps=0 \
    --set train.eval_batches=2 --set train.batch_size=8
v4=$(grep -o '"val_loss": [^,]*' v4/metrics.jsonl); v8=$(grep -o '"val_loss": [^,]*' v8/metrics.jsonl)
[ -n "$v4" ] && [ "$v4" = "$v8" ] && ok || bad "task validation: 4 x 4 rows ($v4) vs 2 x 8 ($v8)"
# the control: batch 4 alone is another update, so the comparison can fail
expect_rc 0 "task: batch 4" "$BIN" train task.json --out b4 --quiet
d=$("$PY" -c "import json; r=[json.loads(l) for l in open('b4/metrics.jsonl')]; s=[json.loads(l) for l in open('b8/metrics.jsonl')]; print(abs(r[0]['loss'] - s[0]['loss']) / s[0]['loss'])")
[[ $d =~ ^[0-9.eE+-]+$ ]] && awk "BEGIN{exit !($d > 1e-4)}" && ok || bad "control: batch 4 and batch 8 agree ($d)"
# text windows keep every target: still the same to float rounding
for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 13))"; done > corpus.txt
cat > text.json <<'JSON'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 2, "batch_size": 4, "seq_len": 16, "steps": 4, "threads": 1, "log_every": 1,
           "eval_every": 0, "eval_batches": 0, "checkpoint_every": 0, "schedule": {"warmup": 1}}}
JSON
expect_rc 0 "text: batch 2 x grad_accum 2" "$BIN" train text.json --out tacc --quiet --set train.batch_size=2 --set train.grad_accum=2
expect_rc 0 "text: batch 4" "$BIN" train text.json --out tb4 --quiet
compare_steps "text: batch 2 x grad_accum 2 vs batch 4" tacc tb4 3 1e-6

# ---- a resume with more steps continues on the longer run's schedule ----
expect_rc 0 "cosine, 10 steps" "$BIN" train text.json --out cos --quiet --set train.steps=10 \
    --set train.optimizer.lr=0.003 --set train.schedule.warmup=2 --set train.schedule.min_lr_ratio=0.1
expect_rc 0 "resumed to 14 steps" "$BIN" train --resume cos --quiet --set train.steps=14
d=$("$PY" - <<'EOF'
import json, math
lr = {r['step']: r['lr'] for r in map(json.loads, open('cos/metrics.jsonl')) if 'lr' in r}
def cos(s, n): return 3e-4 + 2.7e-3 * (1 + math.cos(math.pi * (s - 2) / (n - 2))) / 2
want = [(10, cos(10, 10))] + [(s, cos(s, 14)) for s in range(11, 15)]
print(max(abs(lr[s] - w) / w for s, w in want) if all(s in lr for s, _ in want) else 'missing')
EOF
)
[[ $d =~ ^[0-9.eE+-]+$ ]] && awk "BEGIN{exit !($d <= 1e-6)}" && ok || bad "lr after a resume with more steps: $d"
grep -q "stay there past it" "$SRC/configs/README.md" && bad "configs/README.md: lr_min 'stay there past it'" || ok

# ---- FIRE's initial MLP: variances 1/3 and 1/(3K), as the docs now say ----
expect_rc 0 "a fire run at step 0" "$BIN" train text.json --out fire --quiet --set model.pos=fire \
    --set model.fire.hidden=256 --set train.steps=0
expect_rc 0 "export it" "$BIN" export fire --out fire_export
"$PY" - <<'EOF' && ok || bad "FIRE init: the standard deviations are not sqrt(1/3) and sqrt(1/(3K))"
import json, math, struct, sys
b = open('fire_export/model.safetensors', 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
def std(name):
    s, e = h['blocks.0.attn.fire.' + name]['data_offsets']
    v = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return math.sqrt(sum(x * x for x in v) / len(v))
sys.exit(not (abs(std('w1') / math.sqrt(1 / 3) - 1) < 0.15 and abs(std('b1') / math.sqrt(1 / 3) - 1) < 0.15
              and abs(std('w2') / math.sqrt(1 / 768) - 1) < 0.15))
EOF
grep -q 'FIRE `w1`, `b1` `N(0, 1/3)`' "$SRC/docs/model-format.md" && bad "docs/model-format.md: FIRE's N(0, 1/3) beside N(0, init_std)" || ok

# ---- extend's default batch: per micro-batch, grad_accum kept ----
expect_rc 0 "a base run with grad_accum 3" "$BIN" train text.json --out base3 --quiet --set train.grad_accum=3
expect_rc 0 "extend it to 24" "$BIN" extend base3 --to 24 --budget 0.5 --out base3_24 --quiet
"$PY" -c "import json; t = json.load(open('base3_24/config.json'))['train']
# 4 x 16 / 24 = 2 sequences a micro-batch, 3 micro-batches; K = 0.5 x 4 x 4 x 16 x 3 / (2 x 3 x 24) = 2.67 -> 3
assert (t['batch_size'], t['grad_accum'], t['steps']) == (2, 3, 3), t" && ok || bad "extend's default batch and steps"
grep -q "RUN's tokens per step / N" "$SRC/docs/extension.md" && bad "docs/extension.md: --batch 'RUN's tokens per step / N'" || ok

# ---- generate: fox's cache slides past --context, as README's list now says ----
# (two layers: with one, a sliding cache is the re-run forward); sinusoidal, which re-runs,
# is the control that gives --no-cache's text
for pos in fox sinusoidal; do
    expect_rc 0 "a 2-layer $pos run" "$BIN" train text.json --out "$pos" --quiet --set model.pos="$pos" \
        --set model.init_std=0.3 --set model.n_layers=2
    expect_rc 0 "$pos: cached, past --context" "$BIN" generate "$pos" --prompt "line 1" --context 6 --tokens 40 --temperature 0
    cp out.txt cached.txt
    expect_rc 0 "$pos: --no-cache" "$BIN" generate "$pos" --prompt "line 1" --context 6 --tokens 40 --temperature 0 --no-cache
    if cmp -s out.txt cached.txt; then same=yes; else same=no; fi
    [ "$same" = "$([ "$pos" = fox ] && echo no || echo yes)" ] && ok || bad "$pos: cached and --no-cache texts past --context: same=$same"
done
grep -A1 "Past it, relative methods" "$SRC/README.md" | tr '\n' ' ' | grep -q "cope, fox)" && ok || bad "README: fox is not among the methods whose cache slides"

# ---- nonfinite: skip on weights that overflow every forward stops after a streak ----
# (SGD at lr 100 without clipping: a finite but huge update, then every loss is NaN and,
# the weights unchanged by a skipped update, every later step skipped; the run went on to
# its last step and exited 0)
cat > nf.json <<'JSON'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 40, "eval_batches": 1, "eval_every": 0, "threads": 1,
           "log_every": 1, "clip_norm": 0, "nonfinite": "skip", "optimizer": {"name": "sgd", "lr": 100},
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON
expect_rc 7 "nonfinite skip: 5 skipped updates in a row" "$BIN" train nf.json --out nf5 --quiet --set train.nonfinite_limit=5
expect_err "5 updates in a row skipped (train.nonfinite_limit 5): the weights do not recover"
ls nf5/checkpoints/step_* >/dev/null 2>&1 && bad "nonfinite_limit: a checkpoint was written" || ok
expect_rc 0 "nonfinite_limit 0: every step skipped, exit 0" "$BIN" train nf.json --out nf0 --quiet --set train.nonfinite_limit=0
[ "$(grep -c '"loss": null' nf0/metrics.jsonl)" -ge 30 ] && ok || bad "nonfinite_limit 0: fewer skipped steps than expected"
expect_rc 2 "nonfinite_limit negative" "$BIN" train nf.json --out nfb --quiet --set train.nonfinite_limit=-1
expect_err "train.nonfinite_limit"

finish cli_probe7
