"""What the result scripts (plot.py, plot_tasks.py, results_*.py) share: reading an input
JSON file (a sweep's results.json, an eval or task report) with an error that names it."""
import json, os, sys


def die(msg):
    """'<script>: error: msg' on stderr, exit 2"""
    print("%s: error: %s" % (os.path.basename(sys.argv[0]), msg), file=sys.stderr)
    sys.exit(2)


def read_json(path):
    """The parsed file, or die naming the path and the reason"""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die("%s: %s" % (path, e))


def run_dir(r):
    """A sweep run's identity: its directory (a sweep and its seed sweep sharing an out dir
    list the same run twice; two sweeps may share point names but never a directory)"""
    return os.path.normpath(r["dir"]) if r.get("dir") else r.get("name")


def sweep_out(doc, path):
    """The out directory of a results.json (where its runs live)"""
    return os.path.normpath(doc.get("out") or os.path.dirname(path) or ".")


def split_labels(runs):
    """Runs are averaged by label; runs whose labels agree but whose "key" (a dict of what
    must agree for an average to mean something: the sweep's out dir, a report's model and
    training length) differs are different experiments. Their labels get the key fields
    that tell them apart, e.g. "alibi [out runs/a]" and "alibi [out runs/b]"."""
    by_label = {}
    for r in runs:
        by_label.setdefault(r["label"], []).append(r)
    for label, rs in by_label.items():
        keys = sorted({json.dumps(r["key"], sort_keys=True) for r in rs})
        if len(keys) < 2:
            continue
        dicts = [json.loads(k) for k in keys]
        fields = [f for f in sorted(set().union(*dicts)) if len({json.dumps(d.get(f)) for d in dicts}) > 1]
        for r in rs:
            r["label"] = "%s [%s]" % (label, ", ".join("%s %s" % (f, r["key"].get(f)) for f in fields))
