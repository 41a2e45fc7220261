#!/usr/bin/env bash
# cli_bench.sh - `stretch bench` end to end on a tiny model (no timing assertions): the JSON
# report has every figure, the FLOP count is 6N + 6LTd for the known parameter count, the
# first loss of random tokens is ~log V, training lowers the loss on the repeated batch,
# one evaluation entry per requested length, --coretype / --omp-wait re-execute the binary
# with OPENBLAS_CORETYPE / OMP_WAIT_POLICY set (and PASSIVE is the default), and bad
# arguments fail with exit code 2; without OPENBLAS_CORETYPE the CLI picks the best BLAS
# core the CPU supports, and keeps an explicit one.
. "$(dirname "$0")/lib_cli.sh" cli_bench

# tiny preset, 3 timed steps, two evaluation lengths, small sgemm probe; the test env
# exports OPENBLAS_CORETYPE=Haswell, so --coretype (SkylakeX where the CPU has AVX-512,
# else Sandybridge's AVX kernels) forces the re-exec path
unset OMP_WAIT_POLICY
AVX512=0
grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && AVX512=1
CORE=Sandybridge; [ $AVX512 = 1 ] && CORE=SkylakeX
expect_rc 0 "bench tiny" "$BIN" bench --preset tiny --steps 3 --warmup 1 --eval 64,256 --eval-reps 1 \
    --sgemm 256 --sgemm-reps 2 --threads 2 --coretype $CORE --json b.json
grep -q "tokens/s" out.txt && ok || bad "no table on stdout"
"$PY" - b.json $CORE <<'EOF' && ok || bad "bench JSON content"
import json, math, sys
j = json.load(open(sys.argv[1]))
c, t = j["config"], j["train"]
V, L, d, T = c["vocab_size"], c["n_layers"], c["d_model"], c["T"]
assert (V, L, d, c["n_heads"], c["B"], T) == (512, 2, 64, 4, 4, 64), c
# tied embeddings: V d + L (12 d^2 + 13 d) + 2 d
n = V * d + L * (12 * d * d + 13 * d) + 2 * d
assert j["n_params"] == n, (j["n_params"], n)
assert abs(j["flops_per_token"] - (6 * n + 6 * L * T * d)) < 1, j["flops_per_token"]
assert j["env"]["openblas_coretype"] == sys.argv[2], j["env"]
assert j["env"]["omp_wait_policy"].upper() == "PASSIVE", j["env"]
assert j["env"]["omp_threads"] == 2, j["env"]
for k in ("forward_s", "backward_s", "optim_s", "step_s", "step_cpu_s", "tokens_per_s", "mfu", "cpu_efficiency"):
    assert t[k] > 0 and math.isfinite(t[k]), (k, t[k])
assert abs(t["step_s"] * t["tokens_per_s"] - c["B"] * T) < 1e-3 * c["B"] * T, t
assert abs(t["loss_first"] - math.log(V)) < 0.3, t["loss_first"]
assert t["loss_last"] < t["loss_first"], t      # AdamW steps on one repeated batch
assert j["sgemm"]["gflops_best"] > 0 and j["sgemm"]["gflops_interleaved"] > 0, j["sgemm"]
assert [e["L"] for e in j["eval"]] == [64, 256], j["eval"]
for e in j["eval"]:
    assert e["tokens_per_s"] > 0 and e["peak_rss_bytes"] > 0 and e["arena_bytes"] > 0, e
    assert abs(e["loss"] - math.log(V)) < 0.3, e
EOF

# OPENBLAS_CORETYPE unset: the CLI forces the best core the CPU supports (OpenBLAS's own
# probe falls back to Prescott's SSE3 on a CPU newer than the library, as on the Xeon of
# family 6 model 207), so nothing is left unused; an explicit setting is kept, with a warning
env -u OPENBLAS_CORETYPE "$BIN" selfcheck >sc.txt 2>&1
grep -q "BLAS: OpenBLAS core" sc.txt && ! grep -q "leaves this CPU" sc.txt && ok || bad "unset core: $(head -2 sc.txt)"
if [ $AVX512 = 1 ]; then
    grep -qE "core (SkylakeX|Cooperlake|SapphireRapids)" sc.txt && ok || bad "AVX-512 CPU, unset core: $(head -1 sc.txt)"
else
    # a core whose kernels the CPU cannot run would die of SIGILL at the first product
    # (OpenBLAS does not check): --coretype refuses it (exit 2), and from the environment
    # it is replaced by the best core the CPU runs, with a warning
    expect_rc 2 "bench --coretype SkylakeX without AVX-512" "$BIN" bench --preset tiny --coretype SkylakeX
    expect_msg "--coretype SkylakeX: its kernels need AVX-512 (F, BW, VL, DQ), which this CPU lacks"
    OPENBLAS_CORETYPE=SkylakeX "$BIN" selfcheck >sc.txt 2>&1 && ok || bad "selfcheck with SkylakeX: $(tail -2 sc.txt)"
    grep -q "warning: OPENBLAS_CORETYPE=SkylakeX needs AVX-512" sc.txt && grep -q "core Haswell (OPENBLAS_CORETYPE=Haswell)" sc.txt \
        && ok || bad "SkylakeX on a CPU without AVX-512: $(head -2 sc.txt)"
fi
OPENBLAS_CORETYPE=Prescott "$BIN" selfcheck >sc.txt 2>&1
grep -q "core Prescott (OPENBLAS_CORETYPE=Prescott)" sc.txt && ok || bad "explicit core not kept: $(head -1 sc.txt)"
if grep -qw avx2 /proc/cpuinfo; then
    grep -q "warning: BLAS core Prescott leaves this CPU" sc.txt && ok || bad "no warning for Prescott: $(head -2 sc.txt)"
fi

# evaluation only, default wait policy set by the bench; no sgemm probe -> MFU 0, no crash
expect_rc 0 "bench eval only" "$BIN" bench --preset tiny --no-train --eval 128 --sgemm-reps 0 --json e.json
"$PY" -c 'import json,sys; j=json.load(open("e.json")); assert j["train"] is None and len(j["eval"]) == 1, j' && ok || bad "eval-only JSON"

# --profile: the per-op table of the timed steps; its shares add up to 100% (+- rounding),
# the ops of the model appear, the matmul summary names the implementation and GFLOPS,
# and the products by op and shape add up to it
expect_rc 0 "bench --profile" "$BIN" bench --preset tiny --steps 3 --no-eval --sgemm-reps 0 --profile
expect_out "profile: 3 steps, per step (ms)"
for op in linear attention layernorm linear_cross_entropy "optimizer (update)"; do expect_out "  $op "; done
expect_out "implementation: cblas_sgemm"
"$PY" - out.txt <<'EOF2' && ok || bad "profile shares"
import re, sys
t = open(sys.argv[1]).read().split("profile:")[1].split("matmuls")[0]
shares = [float(x) for x in re.findall(r"([0-9.]+)%", t)]
assert len(shares) >= 6 and abs(sum(shares) - 100) < 1.0, shares
g = re.findall(r"(forward|backward) +[0-9]+ calls/step +[0-9.]+ ms/step +([0-9.]+) GFLOPS", open(sys.argv[1]).read())
assert [p for p, _ in g] == ["forward", "backward"] and all(float(x) > 0 for _, x in g), g
# the products by op and shape (tiny: B*T = 256 rows, d 64, 2 layers, V 512) add up to
# the phase summary, and each lands on the op that issued it
txt = open(sys.argv[1]).read()
summ = {p: (int(c), float(ms)) for p, c, ms in
        re.findall(r"(forward|backward) +([0-9]+) calls/step +([0-9.]+) ms/step", txt)}
rows = re.findall(r"^  (forward|backward) +(\S+) +([0-9]+ x [0-9]+ x [0-9]+) +([NT]{2}) +([0-9]+) +([0-9.]+) +([0-9.]+)",
                  txt.split("matmuls by op and shape")[1], re.M)
assert rows, "no shape table"
for p in ("forward", "backward"):
    mine = [r for r in rows if r[0] == p]
    assert sum(int(r[4]) for r in mine) == summ[p][0], (p, mine, summ)
    assert abs(sum(float(r[5]) for r in mine) - summ[p][1]) < 0.001 * len(mine) + 1e-3, (p, mine, summ)
assert {r[1] for r in rows} == {"linear", "linear_cross_entropy"}, rows
have = {(r[0], r[1], r[2], r[3], r[4]) for r in rows}
for want in [("forward", "linear", "256 x 192 x 64", "NT", "2"),          # qkv
             ("backward", "linear", "192 x 64 x 256", "TN", "2"),         # its dW
             ("backward", "linear", "256 x 64 x 192", "NN", "2"),         # its dx
             ("forward", "linear_cross_entropy", "256 x 512 x 64", "NT", "1")]:
    assert want in have, (want, sorted(have))
EOF2

# errors: unknown preset, unknown option, bad value, bad lengths, d not a multiple of heads
expect_rc 2 "unknown preset" "$BIN" bench --preset XL
expect_rc 2 "unknown option" "$BIN" bench --preset tiny --frobnicate 1
expect_rc 2 "bad value" "$BIN" bench --preset tiny --steps -3
expect_rc 2 "bad eval lengths" "$BIN" bench --preset tiny --eval 64,x
expect_rc 2 "heads" "$BIN" bench --preset tiny --d 66 --heads 4
expect_rc 2 "bad wait policy" "$BIN" bench --preset tiny --omp-wait sometimes
# --decode: KV-cache decoding as generate runs it (a prefill, then tokens one by one)
expect_rc 0 "decode bench" "$BIN" bench --preset tiny --no-train --no-eval --sgemm 0 --decode 16 --decode-context 40 --json dec.json
grep -q "decoding (KV cache, as generate): prefill 40 tokens" out.txt && ok || bad "no decode line: $(cat out.txt)"
/usr/bin/python3 -c "
import json; d = json.load(open('dec.json'))['decode']
assert d['context'] == 40 and d['tokens'] == 16 and d['tokens_per_s'] > 0 and d['prefill_s'] > 0 and d['cache_bytes'] > 0, d
" && ok || bad "decode JSON: $(cat dec.json)"
/usr/bin/python3 -c "import json; assert json.load(open('e.json'))['decode'] is None" && ok ||
    bad "a bench without --decode: $(grep -o '"decode".*' e.json)"
expect_rc 2 "decode -1" "$BIN" bench --preset tiny --decode -1
expect_rc 2 "decode context 0" "$BIN" bench --preset tiny --decode 4 --decode-context 0
echo x > afile   # a report under a file: refused before the benchmark runs
expect_rc 3 "unwritable json" "$BIN" bench --preset tiny --steps 1 --no-eval --sgemm-reps 0 --json afile/dir/x.json
# a directory the file system refuses files in although access() lets root pass (/proc):
# refused before the benchmark too (probe 44: after the whole run), no table printed
expect_rc 3 "json in /proc" "$BIN" bench --preset tiny --steps 1 --no-eval --sgemm-reps 0 --json /proc/x.json
expect_err "--json /proc/x.json: cannot create"
grep -q "tokens/s" out.txt && bad "the benchmark ran before the refusal" || ok

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
