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
