"""What the result scripts (plot.py, plot_tasks.py, results_*.py) share: reading an input
JSON file (a sweep's results.json, an eval or task report) with an error that names it,
the identity of a sweep and of its runs, the labels that tell experiments apart, the runs
a sweep did not evaluate, and writing a figure."""
import json, math, os, sys


def die(msg, code=2):
    """'<script>: error: msg' on stderr, exit code (2: a bad input or flag; 1: a failure
    that is not the input's, e.g. an output file that cannot be written)"""
    print("%s: error: %s" % (os.path.basename(sys.argv[0]), msg), file=sys.stderr)
    sys.exit(code)


def warn(msg):
    print("%s: warning: %s" % (os.path.basename(sys.argv[0]), msg), file=sys.stderr)


def read_json(path):
    """The parsed file (a JSON object), or die naming the path and the reason"""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        die("%s: %s" % (path, e))
    if not isinstance(doc, dict):
        die("%s: holds a JSON %s, not an object (a sweep's results.json or a `stretch eval` report)"
            % (path, type(doc).__name__ if doc is not None else "null"))
    return doc


def sweep_doc(path):
    """A sweep's results.json, or die naming the path"""
    doc = read_json(path)
    if not isinstance(doc.get("runs"), list):
        die("%s: not a sweep's results.json (it has no \"runs\" list)" % path)
    return doc


def exp(x):
    """e**x, inf where it overflows (a diverged run's loss of 1000 nats has ppl inf)"""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def shown_path(p):
    """A path as the user would type it from here: relative to the current directory"""
    rel = os.path.relpath(p)
    return p if rel.startswith(os.pardir + os.sep + os.pardir) else rel


def sweep_where(doc, path):
    """(identity, shown name, root) of the sweep a results.json belongs to. Its "out" and
    the runs' "dir" are relative to the directory the sweep ran in, so they collide for
    sweeps run from two directories; the results.json file's own directory does not. When
    that directory is the sweep's out dir (the file was not moved), the sweep is that
    directory and root the directory it ran in (where the runs' "dir" start); a copied
    results.json is its own sweep (root None)."""
    here = os.path.realpath(os.path.dirname(path) or ".")
    out = os.path.normpath(doc.get("out") or ".")
    if os.path.isabs(out):
        return os.path.realpath(out), shown_path(out), "/"
    parts = [] if out == "." else out.split(os.sep)
    root = here
    for p in reversed(parts):
        if os.path.basename(root) != p:
            f = os.path.realpath(path)
            return f, shown_path(f), None
        root = os.path.dirname(root)
    return here, shown_path(here), root


def run_id(r, where):
    """A sweep run's identity: its directory, resolved (a sweep and its seed sweep sharing an
    out dir list the same run twice; two sweeps may share point names, and relative dirs)"""
    ident, _, root = where
    d = r.get("dir")
    if d and root is not None:
        return os.path.normpath(os.path.join(root, d))
    return ident + "::" + (d or r.get("name", "?"))


def sweep_runs(paths, docs=None):
    """Every run of the sweeps' results.json files (each run once), as dicts: the run's own
    keys plus "id", "sweep" (the shown out dir), "where" (sweep identity), "path" (the input
    file), "shown" (the run dir as seen from here) and "evaluated" (it has results)."""
    runs, seen = [], set()
    for path in paths:
        doc = docs[path] if docs else sweep_doc(path)
        where = sweep_where(doc, path)
        for r in doc["runs"]:
            if not isinstance(r, dict):
                die("%s: a run that is not an object: %s" % (path, json.dumps(r)[:80]))
            rid = run_id(r, where)
            if rid in seen:
                continue
            seen.add(rid)
            shown = shown_path(rid) if where[2] is not None else "%s: %s" % (path, r.get("dir") or r.get("name", "?"))
            runs.append(dict(r, id=rid, sweep=where[1], where=where[0], path=path, shown=shown,
                             evaluated=isinstance(r.get("results"), list)))
    return runs


def sweep_key(r):
    """What must agree for runs of a sweep to be averaged: the sweep (the resolved out dir)
    and the evaluation protocol"""
    return {"kind": "sweep", "out": r["sweep"], "split": r.get("split"), "mode": r.get("mode"),
            "stride": r.get("stride")}


def brief(v):
    """A key's value as a label shows it: a dict as its scalar fields (a report's "data")"""
    if isinstance(v, dict):
        return ",".join("%s=%s" % (k, brief(x)) for k, x in sorted(v.items()) if not isinstance(x, (dict, list)))
    return str(v)


def _flat(d, pre=""):
    """A report's "data" as one level of scalar fields: {"source": "text", ...,
    "eval_data.path": ...} (--data's file is part of what was evaluated)"""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, pre + k + "."))
        elif not isinstance(v, list):
            out[pre + k] = v
    return out


def report_key(doc):
    """What must agree for `stretch eval` reports to be averaged (as seeds of one
    experiment): the model, its training length and precision, the checkpoint's step, the
    data and the protocol (split, mode, stride, tokens, precision) and the transform"""
    train = doc.get("train") or {}
    key = dict(doc.get("model") or {}, kind="report", seq_len=train.get("seq_len"),
               train_precision=train.get("precision"))
    for k in ("split", "mode", "stride", "step", "split_tokens", "precision"):
        key[k] = doc.get(k)
    data = doc.get("data") or {}
    key["data"] = _flat({k: v for k, v in data.items() if k != "entropy_rate"}) if isinstance(data, dict) else data
    key["transform"] = brief(doc.get("transform")) if doc.get("transform") else ""
    return key


# What a label names first when experiments differ in several ways: what the user chose
# (the sweep, the data, the training length, the protocol, ...) before what follows from it
# (the data's vocabulary and so the parameter count, the tokens a split has). Two methods
# trained on tinyshakespeare and on WikiText-2 were labelled with every field that
# differed, "alibi [data bytes_exact=True,...,hash=...,unit=byte, params 116480,
# split_tokens 8192, step 30, vocab_size 256]", and the legend squeezed the plot's axes
# to a sliver; they are "alibi [data source=text]" and "alibi [data source=wikitext]" now.
FIELD_ORDER = ("out", "data", "seq_len", "split", "mode", "stride", "transform", "precision", "train_precision",
               "pos", "n_layers", "d_model", "n_heads", "step")
FIELD_LAST = ("split_tokens", "vocab_size", "params")
DATA_ORDER = ("source", "eval_data.path", "tokenizer", "unit")
DATA_LAST = ("bytes_exact", "bytes_per_token", "changed_since_training", "eval_data.crc32", "hash")


def _ordered(names, first, last):
    rank = {f: i for i, f in enumerate(first)}
    tail = {f: i for i, f in enumerate(last)}
    return sorted(names, key=lambda f: (1 if f in tail else 0, rank.get(f, len(first)), tail.get(f, 0), f))


def _telling(fields, dicts, keys, first=FIELD_ORDER, last=FIELD_LAST, must=("split", "mode")):
    """The split and the protocol whenever they differ (the title lists them joined,
    "nonoverlapping / sliding": each line says which is its own), and of the other fields
    the fewest, taken in the order above, that tell keys apart as well as all of them do"""
    def classes(fs):
        return len({json.dumps([dicts[k].get(f) for f in fs], sort_keys=True) for k in keys})
    rest = [f for f in fields if f not in must]
    want, chosen = classes(rest), []
    for f in _ordered(rest, first, last):
        if classes(chosen) == want:
            break
        if classes(chosen + [f]) > classes(chosen):
            chosen.append(f)
    return _ordered(chosen + [f for f in fields if f in must], first, last)


def _shown(f, v, all_v):
    """Field f's value v in a label; a dict (a report's data) by its fields that tell
    all_v apart ("data source=text")"""
    if not isinstance(v, dict) or not all(isinstance(x, dict) for x in all_v):
        return "%s %s" % (f, brief(v))
    subs = sorted(set().union(*all_v))
    ds = dict(enumerate(all_v))
    differ = [s for s in subs if len({json.dumps(d.get(s)) for d in all_v}) > 1]
    sub = _telling(differ, ds, list(ds), DATA_ORDER, DATA_LAST, ())
    return "%s %s" % (f, ",".join("%s=%s" % (s, brief(v.get(s))) for s in sub))


def _distinguish(keys):
    """{key json: [label parts]} telling the keys (distinct dicts) apart: the fields known
    (not None) in all of them whose values differ, then again within each set the first
    fields left alike. A sweep's and a report's keys differ in kind: the sweep's runs are
    shown by their out dir, the reports as "eval report"."""
    parts = {k: [] for k in keys}
    dicts = {k: json.loads(k) for k in keys}
    kinds = {dicts[k].get("kind") for k in keys}
    if len(kinds) > 1:
        for k in keys:
            parts[k].append("out %s" % dicts[k].get("out") if dicts[k].get("kind") == "sweep" else "eval report")
        cells = {}
        for k in keys:
            cells.setdefault(dicts[k].get("kind"), []).append(k)
    else:
        names = sorted(set().union(*dicts.values()))
        fields = [f for f in names if f != "kind" and all(dicts[k].get(f) is not None for k in keys)
                  and len({json.dumps(dicts[k][f]) for k in keys}) > 1]
        if not fields:   # they differ only where some are unknown: name those, "?" for unknown
            fields = [f for f in names if len({json.dumps(dicts[k].get(f)) for k in keys}) > 1]
            for k in keys:
                parts[k] += ["%s %s" % (f, "?" if dicts[k].get(f) is None else brief(dicts[k][f])) for f in fields]
            return parts
        for k in keys:
            parts[k] += [_shown(f, dicts[k][f], [dicts[j][f] for j in keys]) for f in _telling(fields, dicts, keys)]
        cells = {}
        for k in keys:
            cells.setdefault(json.dumps([dicts[k][f] for f in fields]), []).append(k)
    for ks in cells.values():
        if len(ks) > 1:
            for k, more in _distinguish(ks).items():
                parts[k] += more
    return parts


def split_labels(runs):
    """Runs are averaged by label; runs whose labels agree but whose "key" (a dict of what
    must agree for an average to mean something: sweep_key, report_key) differs are
    different experiments. Their labels get what tells them apart, naming only fields known
    on both sides that differ, the fewest that do (_telling), e.g. "alibi [out runs/a]" and
    "alibi [out runs/b]", "alibi [mode nonoverlapping]" and "alibi [mode sliding]",
    "alibi [seq_len 32]", "alibi [data source=wikitext]"."""
    by_label = {}
    for r in runs:
        by_label.setdefault(r["label"], []).append(r)
    for label, rs in by_label.items():
        keys = sorted({json.dumps(r["key"], sort_keys=True) for r in rs})
        if len(keys) < 2:
            continue
        parts = _distinguish(keys)
        for r in rs:
            r["label"] = "%s [%s]" % (label, ", ".join(parts[json.dumps(r["key"], sort_keys=True)]))


def planned_mode(r, runs):
    """The protocol a run without results was to be evaluated with: its eval.mode override,
    else that of its group's evaluated runs in its sweep, else a "-MODE" end of its name;
    None when nothing says"""
    m = (r.get("overrides") or {}).get("eval.mode")
    if m:
        return m
    for o in runs:
        if o["evaluated"] and o["where"] == r["where"] and o.get("group") == r.get("group") and o.get("mode"):
            return o["mode"]
    for m in ("nonoverlapping", "sliding"):
        if r.get("group", r.get("name", "")).endswith("-" + m):
            return m
    return None


def attach_unevaluated(missing, runs):
    """Give each run without results (failed, pending, incomplete) the label of its group's
    evaluated runs of the same sweep (after split_labels), else its own label."""
    for m in missing:
        same = {r["label"] for r in runs if r.get("where") == m["where"] and r.get("group") == m.get("group")}
        if len(same) == 1:
            m["label"] = same.pop()


def unevaluated_note(missing):
    """One sentence naming the runs that have no results and their state, or "" """
    if not missing:
        return ""
    names = ["%s (%s)" % (m["shown"], m.get("state", "?")) for m in missing]
    pending = any(m.get("state") in ("pending", "incomplete") for m in missing)
    return "%d run%s not evaluated%s: %s" % (
        len(missing), "" if len(missing) == 1 else "s", " (the sweep is not finished)" if pending else "",
        ", ".join(names))


def check_figure_path(out):
    """Die unless matplotlib can write out's format (its extension)"""
    from matplotlib.backend_bases import FigureCanvasBase
    ext = os.path.splitext(out)[1][1:].lower()
    known = FigureCanvasBase.get_supported_filetypes()
    if ext not in known:
        die("-o %s: %s; give one of .%s" % (out, "unsupported image format '.%s'" % ext if ext else "no extension",
                                            ", .".join(sorted(known))))


def save_figure(fig, out, **kw):
    """fig to out, its directory made first (as the stretch binary does for its outputs)"""
    try:
        d = os.path.dirname(out)
        if d and os.path.exists(d) and not os.path.isdir(d):
            die("-o %s: %s is a file, not a directory" % (out, d))
        if d:
            os.makedirs(d, exist_ok=True)
        fig.savefig(out, **kw)
    except (OSError, ValueError) as e:
        die("-o %s: %s" % (out, e.strerror if isinstance(e, OSError) and e.strerror else e), 1)
