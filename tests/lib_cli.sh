# lib_cli.sh - shared preamble of the shell tests (tests/cli_*.sh), sourced as
#     . "$(dirname "$0")/lib_cli.sh" NAME
# Sets BIN (the stretch binary), PY (a python with json), SRC (the source tree), makes and
# enters a scratch directory T (removed on exit), and defines the counters and checks:
#   ok / bad MSG                 count a pass / a failure (printed)
#   expect_rc CODE WHAT CMD...   run CMD (stdout -> out.txt, stderr -> err.txt), check exit
#   expect_out TEXT / expect_err TEXT (alias expect_msg)   grep out.txt / err.txt
#   skip MSG                     a part skipped for missing inputs (printed, counted)
#   finish NAME                  the closing line; exit 1 on failures, else 77 (ctest's
#                                SKIP_RETURN_CODE: reported skipped) when a part was skipped
#   need_torch NAME              the test is skipped (finish NAME) unless /usr/bin/python3
#                                imports torch (the PyTorch reference scripts)
#   same_text WHAT ARGS...       generate with the KV cache and with --no-cache: same text
#   tiny_text_run POS            corpus.txt (300 short lines) and cfg.json: a 2-layer byte
#                                model of method POS, 20 steps of 4 x 32 (a run in ~0.2 s)
#   tiny_synthetic_cfg FILE      a 1-layer d 16 rope model on a 16-token synthetic corpus,
#                                2 steps of 4 x 16 on one thread (the probe's run, ~0.1 s)
#   tiny_task_cfg FILE           the same size of model on the copy task (sizes 2..4)
#   big_vocab_cfg FILE           words.txt (3,000 distinct 12-letter words) and a 1-layer
#                                d 2 word-level run of 1 step whose tokenizer.json (~45 KB)
#                                outweighs its model.safetensors (~25 KB): export failures
# Each test ends with: finish NAME (or echo "NAME: ..."; [ "$fails" -eq 0 ])
set -u
BIN=${STRETCH_BIN:?STRETCH_BIN is not set}
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
SRC=${STRETCH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/${1:-cli}.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0; passes=0; skips=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
skip() { echo "SKIP $*"; skips=$((skips + 1)); }
finish() {
    echo "$1: $passes passed, $fails failed, $skips skipped"
    [ "$fails" -eq 0 ] || exit 1
    [ "$skips" -eq 0 ] || exit 77
    exit 0
}
need_torch() {
    /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 && return 0
    skip "$1: /usr/bin/python3 with torch not found (apt-get install python3-torch)"
    finish "$1"
}
expect_rc() { # expected-code description command...
    local want=$1 what=$2; shift 2
    "$@" >out.txt 2>err.txt; local rc=$?
    if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, expected $want"; tail -5 err.txt; fi
}
expect_out() { grep -q -- "$1" out.txt && ok || { bad "output lacks '$1'"; cat out.txt; }; }
expect_err() { grep -q -- "$1" err.txt && ok || { bad "message lacks '$1'"; cat err.txt; }; }
expect_msg() { expect_err "$@"; }
# same_text WHAT ARGS...: `stretch generate ARGS` with the KV cache and with --no-cache
# must print the same text (out.txt holds the --no-cache one afterwards)
same_text() {
    local what=$1; shift
    expect_rc 0 "$what (cache)" "$BIN" generate "$@"
    cp out.txt cached.txt
    expect_rc 0 "$what (--no-cache)" "$BIN" generate "$@" --no-cache
    if cmp -s cached.txt out.txt; then ok; else bad "$what: cached and --no-cache text differ"; diff cached.txt out.txt | head -4; fi
}
tiny_text_run() {
    for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > corpus.txt
    cat > cfg.json <<EOF_TINY
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "$1", "init_std": 0.3},
 "data": {"source": "text", "path": "corpus.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 4, "seq_len": 32, "steps": 20, "eval_every": 20, "eval_batches": 1,
           "log_every": 20, "schedule": {"warmup": 2}}}
EOF_TINY
}
tiny_synthetic_cfg() {
    cat > "$1" <<'EOF_SYN'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "rope"},
 "data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 2, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
EOF_SYN
}
tiny_task_cfg() {
    cat > "$1" <<'EOF_TASK'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "copy", "min_size": 2, "max_size": 4}},
 "train": {"batch_size": 4, "seq_len": 32, "steps": 2, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
EOF_TASK
}
big_vocab_cfg() {
    "$PY" - <<'EOF_WORDS'
import random
random.seed(1)
ws = ['w%011d' % i for i in range(3000)]
with open('words.txt', 'w') as f:
    f.write('\n'.join(' '.join(ws[i:i + 10]) for i in range(0, 3000, 10)) + '\n')
    for _ in range(600):
        f.write(' '.join(random.choice(ws) for _ in range(12)) + '\n')
EOF_WORDS
    cat > "$1" <<'EOF_WCFG'
{"model": {"n_layers": 1, "d_model": 2, "n_heads": 1, "pos": "alibi"},
 "data": {"source": "text", "path": "words.txt", "tokenizer": "word", "valid_frac": 0.1, "test_frac": 0.1},
 "train": {"seed": 3, "batch_size": 2, "seq_len": 8, "steps": 1, "eval_every": 1, "eval_batches": 1, "threads": 1,
           "log_every": 1, "schedule": {"warmup": 0}}}
EOF_WCFG
}
