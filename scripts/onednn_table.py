#!/usr/bin/python3
"""onednn_table.py - the primitive table of a bf16 run from oneDNN's verbose log.

  ONEDNN_VERBOSE=1 build/stretch bench --preset M --precision bf16 --no-eval > verbose.log
  scripts/onednn_table.py verbose.log [--top 25] [--square-gflops G]

Reads the `onednn_verbose,exec,...` lines (oneDNN 2.x format: engine, primitive,
implementation, propagation, memory descriptors, attributes, auxiliary, problem, time in
ms) and prints a markdown table of the matmuls and reorders grouped by (primitive,
implementation, weights layout, problem): calls, total ms, share of the logged time and,
for matmuls, GFLOPS (2 x batch x M x N x K per call). --square-gflops adds each row's rate
as a percentage of that figure (the 2048^3 bf16 GEMM of the same run, which `stretch
bench` prints). The log covers every call of the process, warmup and set-up included.
"""
import argparse
import sys
from collections import OrderedDict


def matmul_flops(problem):
    """2 batch M N K from 'BxMxK:BxKxN:BxMxN' or 'MxK:KxN:MxN'."""
    a, b = problem.split(":")[:2]
    a = [int(x) for x in a.split("x")]
    b = [int(x) for x in b.split("x")]
    batch = a[0] if len(a) == 3 else 1
    return 2.0 * batch * a[-2] * a[-1] * b[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--square-gflops", type=float, default=0.0)
    args = ap.parse_args()
    groups = OrderedDict()
    try:
        lines = open(args.log, errors="replace").read().splitlines()
    except OSError as e:
        sys.exit("onednn_table.py: %s: %s" % (args.log, e.strerror))
    for line in lines:
        f = line.split(",")
        if len(f) < 10 or f[0] != "onednn_verbose" or f[1] != "exec":
            continue
        prim, impl, mds, problem = f[3], f[4], f[6], f[-2]
        try:
            ms = float(f[-1])
        except ValueError:
            continue
        wei = next((m for m in mds.split() if m.startswith("wei")), "")
        if prim == "reorder":
            wei = mds.split()[-1] if mds.split() else ""
        g = groups.setdefault((prim, impl, wei.split(":")[-2] if wei.count(":") >= 2 else wei, problem), [0, 0.0])
        g[0] += 1
        g[1] += ms
    if not groups:
        sys.exit("onednn_table.py: %s: no onednn_verbose exec lines (run with ONEDNN_VERBOSE=1)" % args.log)
    total = sum(v[1] for v in groups.values())
    rows = sorted(groups.items(), key=lambda kv: -kv[1][1])
    head = "| primitive | implementation | B layout | problem | calls | ms | share | GFLOPS |"
    if args.square_gflops:
        head += " % of square |"
    print(head)
    print("|---|---|---|---|---:|---:|---:|---:|" + ("---:|" if args.square_gflops else ""))
    for (prim, impl, wei, problem), (n, ms) in rows[:args.top]:
        gf = matmul_flops(problem) * n / (ms * 1e6) if prim == "matmul" and ms > 0 else 0.0
        cell = "%.1f" % gf if gf else ""
        line = "| %s | %s | %s | %s | %d | %.1f | %.1f%% | %s |" % (prim, impl, wei, problem, n, ms,
                                                                 100 * ms / total, cell)
        if args.square_gflops:
            line += " %s |" % ("%.0f%%" % (100 * gf / args.square_gflops) if gf else "")
        print(line)
    print("\n%d primitive groups, %.1f ms logged in all (%d more groups not shown)" %
          (len(rows), total, max(0, len(rows) - args.top)))


if __name__ == "__main__":
    main()
