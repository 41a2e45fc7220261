#!/usr/bin/env bash
# cli_msgs.sh - the command line's error messages name the right thing (the bad-input
# probe's items 6a-6d, 7, 8c and its minor observations), through the real binary:
#   values     a flag given last without its value says "FLAG needs a value" (not
#              "unknown option"), an unknown flag given last is "unknown option" (not
#              "needs a value"), a stray argument is "unexpected argument", in every
#              subcommand; `stretch CMD RUN --help` prints CMD's usage and exits 0
#   extend     an error in a value that came from extend's own flags names the flag (not
#              --set, not RUN/config.json); the default RUN-to<N> is beside RUN whatever
#              the trailing slashes, and RUN "." needs --out
#   sweep      an occupied point directory is refused with advice a sweep can follow
#              (it has no --force)
#   coretype   bench --coretype with a name OpenBLAS does not know is exit 2 listing the
#              names; a known one OpenBLAS replaces runs with a warning naming both cores
#   files      a directory as CONFIG.json or SWEEP.json "is a directory" (exit 3); a
#              malformed sweep file gets line, column and byte
# Every command runs under a timeout; each case checks the exit code (2 usage/config,
# 3 I/O) and what the message says, and, where it matters, what it must not say.
. "$(dirname "$0")/lib_cli.sh" cli_msgs
TIMEOUT="${STRETCH_MSGS_TIMEOUT:-120}"

# run CMD...: out.txt, err.txt and RC; a hang or a signal is a failure of its own
run() {
    timeout -k 5 "$TIMEOUT" "$@" >out.txt 2>err.txt
    RC=$?
    if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then bad "$* -> hang (killed after ${TIMEOUT}s)"; fi
    if [ "$RC" -gt 128 ] && [ "$RC" -ne 130 ]; then bad "$* -> killed by signal $((RC - 128))"; fi
}
# expect CODE 'SUBSTRING'... -- CMD...: exit CODE and every SUBSTRING in stderr (one check)
expect() {
    local code="$1" w
    shift
    local wants=()
    while [ "$1" != "--" ]; do wants+=("$1"); shift; done
    shift
    run "$@"
    if [ "$RC" -ne "$code" ]; then bad "$* -> exit $RC, expected $code: $(head -c 400 err.txt)"; return; fi
    for w in "${wants[@]}"; do
        grep -qF -- "$w" err.txt || { bad "$* -> message lacks '$w': $(head -c 400 err.txt)"; return; }
    done
    ok
}
# lacks 'SUBSTRING': the last command's stderr does not say it (a misleading message)
lacks() { if grep -qF -- "$1" err.txt; then bad "message says '$1': $(head -c 400 err.txt)"; else ok; fi; }

tiny_synthetic_cfg tiny.json
expect 0 -- "$BIN" train tiny.json --out run --quiet

# ================================================================ values ====
# a known flag given last: it needs a value (generate used to call it unknown)
for f in --prompt --tokens --context --temperature --top-k --seed --precision --transform --window; do
    expect 2 "$f needs a value" -- "$BIN" generate run "$f"
    lacks "unknown option"
done
expect 2 "--lengths needs a value" -- "$BIN" eval run --lengths
expect 2 "--trials needs a value" -- "$BIN" eval run --task --trials
expect 2 "--warmup needs a value" -- "$BIN" extend run --to 32 --warmup
expect 2 "--json needs a value" -- "$BIN" bench --preset tiny --json
expect 2 "--syn-vocab needs a value" -- "$BIN" data --source synthetic --syn-vocab
# an unknown flag given last is unknown, not a flag missing its value
expect 2 "unknown option '--bogus'" -- "$BIN" generate run --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" eval run --bogus
expect 2 "option '--bogus' does not apply" -- "$BIN" eval run --task --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" extend run --to 32 --steps 1 --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" bench --preset tiny --bogus
expect 2 "unknown option '--bogus'" -- "$BIN" data --source synthetic --bogus
# a stray argument is unexpected (bench read it as a flag)
expect 2 "unexpected argument 'extra'" -- "$BIN" bench --preset tiny extra
lacks "needs a value"
expect 2 "unexpected argument 'extra'" -- "$BIN" bench extra --preset tiny
expect 2 "unexpected argument 'extra'" -- "$BIN" generate run extra
expect 2 "unexpected argument 'extra'" -- "$BIN" eval run extra
expect 2 "unexpected argument 'extra'" -- "$BIN" extend run extra --to 32 --steps 1
expect 2 "unexpected argument 'extra'" -- "$BIN" export run extra --out x
expect 2 "unexpected argument" -- "$BIN" data --source synthetic extra
expect 2 "unexpected argument 'extra'" -- "$BIN" train tiny.json extra
# --help after the run directory: the subcommand's usage on stdout, exit 0
for c in generate export eval extend; do
    expect 0 -- "$BIN" "$c" run --help
    expect_out "usage: stretch $c"
done
expect 0 -- "$BIN" eval run --task --help
expect_out "usage: stretch eval"
expect 0 -- "$BIN" generate run --tokens 3 --help
expect_out "usage: stretch generate"
expect_out "  --top-p P "   # generate --help describes its flags (probe 28)
# ... as the other subcommands did already
expect 0 -- "$BIN" train tiny.json --help
expect_out "usage: stretch train"
expect 0 -- "$BIN" bench --preset tiny --help
expect_out "usage: stretch bench"
expect 0 -- "$BIN" data --source synthetic --help
expect_out "usage: stretch data"

# ================================================================ extend ====
# a value from extend's own flag is named by the flag, not as --set or RUN/config.json
expect 2 "--transform" 'unknown value "bogus"' -- "$BIN" extend run --to 32 --steps 1 --transform bogus --out xb
lacks "--set"
expect 0 -- "$BIN" train tiny.json --set train.schedule.kind=cosine --out cosb --quiet
expect 2 "--warmup" "--steps" "5 exceeds train.steps (2)" -- "$BIN" extend cosb --to 32 --steps 2 --warmup 5 --out xb
lacks "cosb/config.json"
expect 2 "--to" "train.seq_len" -- "$BIN" extend run --to 100000 --steps 1 --out xb --quiet
lacks "run/config.json"
# ... while a value of the user's own --set is still named as --set KEY
expect 2 "--set model.scaling.transform" -- "$BIN" extend run --to 32 --steps 1 --set model.scaling.transform=bogus --out xb
expect 2 "--set train.steps" -- "$BIN" extend run --to 32 --steps 1 --transform pi --set train.steps=abc --out xb
[ ! -e xb ] && ok || bad "a refused extension wrote xb"
# the default name: RUN-to<N> beside RUN whatever the slashes (run/ made run/-to32)
for r in run/ run// ./run "$T/run/"; do
    expect 0 -- "$BIN" extend "$r" --to 32 --steps 1 --quiet
    [ -d run-to32 ] && [ ! -e run/-to32 ] && ok || bad "extend $r: made $(ls -d run-to32 run/-to32 2>/dev/null)"
    rm -rf run-to32 run/-to32
done
# RUN "." or ".." names no directory to put it beside: --out is required
(cd run && "$BIN" extend . --to 32 --steps 1 --quiet >../out.txt 2>../err.txt); RC=$?
[ "$RC" -eq 2 ] && grep -q -- "--out" err.txt && ok || bad "extend . -> exit $RC: $(cat err.txt)"
[ ! -e run/.-to32 ] && [ ! -e run-to32 ] && ok || bad "extend . wrote a run"
(cd run && "$BIN" extend . --to 32 --steps 1 --quiet --out ../dot >../out.txt 2>../err.txt); RC=$?
[ "$RC" -eq 0 ] && [ -s dot/config.json ] && ok || bad "extend . --out ../dot -> exit $RC: $(cat err.txt)"

# ================================================================= sweep ====
# an occupied point directory: the advice is what a sweep can do (it has no --force)
printf '{"base": "tiny.json", "variants": [{"name": "a", "model.pos": "alibi"}], "eval": {"lengths": [16]}, "out": "sw"}' >sw.json
mkdir -p occ/a && echo "my notes" >occ/a/notes.txt
expect 3 "occ/a: directory is not empty (holds 'notes.txt')" "move or remove" "another --out" -- "$BIN" sweep sw.json --out occ --quiet
lacks "--force"
[ "$(cat occ/a/notes.txt)" = "my notes" ] && ok || bad "the occupied point directory was modified"
# train keeps its own advice
mkdir -p occt && echo "my notes" >occt/notes.txt
expect 3 "use --force to train there anyway" -- "$BIN" train tiny.json --out occt --quiet

# ============================================================== coretype ====
# OpenBLAS runs another core without a word for a name it does not know: refused
BENCH=(bench --preset tiny --steps 1 --eval none --sgemm 0 --threads 1)
expect 2 "--coretype 'NoSuchCore'" "Haswell" "SkylakeX" -- "$BIN" "${BENCH[@]}" --coretype NoSuchCore
# a known name OpenBLAS replaces (Katmai is 32-bit only: Prescott on x86-64) runs, with a warning naming both
if [ "$(uname -m)" = x86_64 ]; then
    expect 0 "OPENBLAS_CORETYPE=Katmai" "core Prescott instead" -- "$BIN" "${BENCH[@]}" --coretype Katmai
else
    skip "coretype Katmai: x86-64 only"
fi
# any case is OpenBLAS's own name, without a warning
expect 0 -- "$BIN" "${BENCH[@]}" --coretype haswell
lacks "instead"

# ============================================================ file kinds ====
mkdir -p adir
expect 3 "adir: is a directory" -- "$BIN" train adir --out zz --quiet
lacks "read error"
expect 3 "adir: is a directory" -- "$BIN" sweep adir --quiet
lacks "read error"
# a malformed sweep file: line, column and byte, as a run config's
printf '{"base": "tiny.json",\n  "variants": [}' >badsw.json
expect 2 "badsw.json: invalid JSON at line 2, column 16 (byte 37)" -- "$BIN" sweep badsw.json --quiet
printf '{"base": "tiny.json",\n  "variants": [' >endsw.json
expect 2 "endsw.json: invalid JSON: unexpected end of file at line 2, column 16 (byte 37)" -- "$BIN" sweep endsw.json --quiet

# flags that set a config key's value take the config's range, named (probe 28)
expect 2 "--buckets '100000': expected an integer in [0, 65536] (as eval.buckets)" -- "$BIN" eval run --buckets 100000
expect 2 "--threads '5000': expected an integer in [0, 4096] (as train.threads; 0: all cores)" -- "$BIN" eval run --threads 5000
expect 2 "--lr '0': expected a number in (0, 100] (as train.optimizer.lr)" -- "$BIN" extend run --to 64 --steps 1 --lr 0
expect 2 "--threads '5000': expected an integer in [0, 4096]" -- "$BIN" bench --threads 5000
expect 2 "--seed '-1': expected an integer >= 0" -- "$BIN" bench --seed -1

# a value that is a flag: the value was left out (probe 28: "--source --cache-dir D" said
# "unexpected argument D")
expect 2 "--source needs a value (the next argument is the flag --cache-dir)" -- "$BIN" data --source --cache-dir D
expect 2 "--lengths needs a value (the next argument is the flag --quiet)" -- "$BIN" eval run --lengths --quiet

# data flags the source does not read are refused, not ignored (probe 28)
expect 2 "--path: the synthetic source is generated" -- "$BIN" data --source synthetic --path foo
expect 2 "--syn-vocab: applies to --source synthetic, not text" -- "$BIN" data --source text --path tiny.json --syn-vocab 5
# ... and the rest of them (review 41): fractions split text files only, the seed is the
# synthetic corpus's, synthetic data is never cached, --bpe-vocab needs the bpe tokenizer
expect 2 "--valid-frac: applies to --source text, not wikitext" -- "$BIN" data --source wikitext --path wt --valid-frac 0.2
expect 2 "--test-frac: applies to --source text, not synthetic" -- "$BIN" data --source synthetic --test-frac 0.2
expect 2 "--seed: applies to --source synthetic, not text" -- "$BIN" data --source text --path tiny.json --seed 3
expect 2 "--cache-dir: applies to --source text or wikitext, not synthetic" -- "$BIN" data --source synthetic --cache-dir D
expect 2 "--bpe-vocab: applies to --tokenizer bpe, not auto" -- "$BIN" data --source text --path tiny.json --bpe-vocab 300
expect 2 "--bpe-vocab: applies to --tokenizer bpe, not word" -- "$BIN" data --source text --path tiny.json --tokenizer word --bpe-vocab 300

# logn with a training length of 1: the key the user set, not the derived attn_scale_len
# (review 42); eval.max_tokens ends at 1e12 like every count (configs/README.md)
expect 2 'train.seq_len: model.attn_scale "logn" scales by log_L n with L the training length, which must be >= 2 (got 1)' \
    -- "$BIN" train tiny.json --set model.attn_scale=logn --set train.seq_len=1
expect 2 "eval.max_tokens: must be in [0, 1e12], got 2e12" -- "$BIN" train tiny.json --set eval.max_tokens=2000000000000

# a flag given twice is refused, not silently the last (probe 27, 28); --set repeats
expect 2 "--precision given twice ('bf16' and 'fp32'): give it once" -- "$BIN" eval run --precision bf16 --precision fp32
expect 2 "--out given twice ('a' and 'b'): give it once" -- "$BIN" train tiny.json --out a --out b
expect 2 "--out given twice ('a' and 'b'): give it once" -- "$BIN" export run --out a --out b
# ... under its alias too: -o is --out (the run went to b, a was dropped without a word)
expect 2 "--out given twice ('a' and 'b'; -o is --out): give it once" -- "$BIN" train tiny.json --out a -o b --quiet
expect 2 "--out given twice ('a' and 'b'; -o is --out): give it once" -- "$BIN" train tiny.json -o a --out b --quiet
expect 2 "--out given twice ('a' and 'b'; -o is --out): give it once" -- "$BIN" extend run --to 32 --steps 1 -o a --out b
[ ! -e a ] && [ ! -e b ] && ok || bad "a refused --out a -o b wrote $(ls -d a b 2>/dev/null)"
expect 2 "--jobs given twice ('1' and '2'): give it once" -- "$BIN" sweep x.json --jobs 1 --jobs 2

# one prefix for every error line, "stretch CMD: error: " (cli_line): a usage error
# adds the usage line after it; a reported error, data's flag values and the dispatcher's
# own say it the same way (usage errors said "stretch eval: ...", others "stretch: error:
# ...", data's "stretch: error: data: ...")
prefix() { # CMD: the first line of err.txt starts with "stretch CMD: error: " and says no other prefix
    head -1 err.txt | grep -q "^stretch $1: error: " && ! grep -q "error: \(stretch\|$1\)\b" err.txt && ok ||
        bad "error prefix of '$1': $(head -c 300 err.txt)"
}
expect 2 "--lengths 'abc'" -- "$BIN" eval run --lengths abc
prefix eval
sed -n 2p err.txt | grep -q "^usage: stretch eval " && ok || bad "usage line missing: $(cat err.txt)"
expect 3 "nowhere: no such run directory" -- "$BIN" eval nowhere
prefix eval
expect 2 "--valid-frac: expected a number, got \"abc\"" -- "$BIN" data --source text --path tiny.json --valid-frac abc
prefix data
sed -n 2p err.txt | grep -q "^usage: stretch data " && ok || bad "usage line missing: $(cat err.txt)"
expect 3 "nofile.json: cannot open" -- "$BIN" train nofile.json
prefix train
expect 2 "unknown command 'bogus'" -- "$BIN" bogus
head -1 err.txt | grep -q "^stretch: error: unknown command 'bogus'" && ok || bad "dispatcher's prefix: $(head -1 err.txt)"

# a list value given twice (probes 28, 29: two rows of one figure)
expect 2 "--lengths: 64 given twice" -- "$BIN" eval run --lengths 64,32,64
expect 2 "--scales: 0.5 given twice" -- "$BIN" eval run --task --scales 0.5,0.5

finish cli_msgs
