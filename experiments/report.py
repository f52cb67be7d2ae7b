#!/usr/bin/env python3
"""experiments/report.py: run a list of training configurations and build one
report folder (comparison table, heatmaps, cost curve, README.md).

Subcommands (python3 standard library only; the programs do the work):

  run    RUNLIST --out DIR [--jobs N] [--threads T] [--set SECTION.KEY=VALUE ...]
         trains every run of RUNLIST with adapt-train into DIR/runs/NAME
         (--set: added to every run, e.g. train.epochs=2 for a trial).
         The shell commands are written to DIR/commands.txt; with more than one
         run and GNU parallel installed they run under
           parallel --jobs N --joblog DIR/joblog --resume-failed < DIR/commands.txt
         (re-running the same command skips finished runs and retries failed
         ones); otherwise one after another. A run whose directory holds a
         checkpoint continues with --resume.
  build  TRACE|DIR... --out DIR [--baseline TRACE] [--hw TABLE] [--title T]
         [--notes FILE]
         writes DIR/README.md with the comparison table of adapt-perf (markdown;
         the ratio and the AdaPT paper's convention), per-unit tables, one
         heatmap per run and recorded metric that changes, and the cost curve of
         all runs;
         DIR/table.{md,csv,json}; pictures in DIR/pictures (PNG, SVG and PDF).
         All heatmaps of one metric share one colour scale (the metric's range
         over the runs drawn, rounded outward), so that runs compare by colour;
         a run whose per-unit formats never change (fp32, fixed, amp) gets one
         line instead of word-length heatmaps. A DIR argument means DIR/trace.jsonl, or
         DIR/runs/*/trace.jsonl.
  all    RUNLIST --out DIR ...: run, then build from DIR/runs.
  ablation CONFIG --out DIR [--seeds 0,1,2] [--switches A,B] [--each off|on] [--jobs N]
         [--threads T] [--set ...] [--table-only] [--merge JSON ...]
         trains CONFIG with quantization.compat = reference and every [reference]
         switch on, with each switch off alone (runs no_NAME_sN), and corrected,
         the switches being the [reference] keys and ste, round_logits and lb_update
         (the [quantization] settings whose auto value compat decides; both read
         from adapt-train's dry run of CONFIG, its "resolved:" lines),
         once per seed; with --each on, corrected, corrected with each switch on
         alone (runs with_NAME_sN: what that one behaviour costs the corrected
         mode), and reference. Then writes DIR/ablation.{md,json,png}: per variant the
         test accuracy (mean, range, each seed), mean WL, units at 32 bits at the
         end, the first step at which a unit reached 32 bits, final sparsity and
         SU1 (adapt-perf). --merge takes the seeds of an earlier ablation.json of
         the same CONFIG, --set and --each whose switches are among this one's
         (its run folders need not exist any more; the JSON keeps each seed's
         figures): a variant and seed it holds is not run again, so an ablation
         grows by seeds and by switches; two files may hold one variant and seed
         only with the same figures, and every variant must end with the same
         seeds. The figure needs matplotlib.
  accum  DIR... --out DIR [--within POINTS] [--merge JSON ...]
         the accumulator-width study (runlists/fmnist_lenet5_accum.txt, one DIR
         per seed): the runs are grouped by their name less the accumulator part
         (_float32, _exact, _int...), the accumulator read from each trace's
         [arithmetic]; writes DIR/accum.{md,json,png}: per group and accumulator
         the test accuracy (mean, range, each seed) and the forward GEMMs'
         register overflows per step, and per group and rule (overflow rule and
         any explicit binary point F) the narrowest register whose mean
         accuracy, and that of every wider one run, is within POINTS (default
         0.5) of `exact`. Runs without a test record (still training) are left
         out. --merge adds the seeds of an earlier accum.json (its run folders
         need not exist any more), so a study grows by seeds; a seed of a run
         in both is an error. The figure needs matplotlib.
  slurm  RUNLIST --out DIR [--partition P] [--time HH:MM:SS] [--cpus C]
         [--max-parallel K]: writes DIR/commands.txt and prints a Slurm job-array
         script (one array task per line of commands.txt); submit it with sbatch,
         then run `build DIR/runs --out DIR`.

RUNLIST: one run per line, `NAME CONFIG.ini [--set section.key=value ...]`
(shell quoting; '#' starts a comment). Relative paths are taken from the
repository root. Programs are found in --bin (default: the repository root).
NAME is the run's folder (DIR/runs/NAME) and its name: `run` passes
--set run.name=NAME to adapt-train (before the line's own --set, which may
override it), so that two lines of one configuration file are told apart.

Runs are named in every table and figure (README.md, adapt-perf's tables,
adapt-heatmap's legends) by one rule: the trace's run.name when set, else its
configuration file's stem ([reference] for AdaPT's reference variant, the seed
when not 1), else its folder; runs that still share a name get the fewest
trailing components of their path that tell them apart, in parentheses:
runs/long/adapt and runs/my/adapt are "fmnist_lenet5 (long/adapt)" and
"fmnist_lenet5 (my/adapt)". A unique name is kept as it is.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = ("wl", "fl", "lb", "r", "sparsity")
WARNED = set()


# Markdown that renders as the text (adapt-perf's md_text in src/perfmodel/report.c): a table
# cell's '|' and Markdown's escapes get a backslash, HTML's characters become entities, line
# breaks and other control characters (which would end a table row) become spaces.
_MD = {ord(c): "\\" + c for c in "|\\`"}
_MD.update({ord("<"): "&lt;", ord(">"): "&gt;", ord("&"): "&amp;", 0x7F: " "})
_MD.update({c: " " for c in range(0x20)})


def md(text):
    """Text from a trace (or a path) for README.md: see _MD."""
    return str(text).translate(_MD)


def md_code(text):
    """Text from a trace in monospace: md(text) in an HTML code element (a Markdown code span
    would show the escapes)."""
    return "<code>%s</code>" % md(text)


# the name messages give: adapt-report (the installed command sets ADAPT_REPORT_PROG) or report.py
PROG = os.environ.get("ADAPT_REPORT_PROG") or os.path.basename(sys.argv[0] or "report.py")


def die(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr)
    sys.exit(1)


def find_file(name, subdir, ext, what):
    """A run list or configuration as adapt-train finds a configuration (adapt_find_file): NAME
    as given (a path, or relative to the current directory), else in each folder of
    ADAPT_DATA_PATH, this tree or the installed data folder, under experiments/SUBDIR; NAME
    without its extension may leave EXT off. Dies naming the places looked in."""
    names = [name] + ([name + ext] if not name.endswith(ext) else [])
    for n in names:
        if os.path.isfile(n):
            return n
    explicit = os.path.isabs(name) or name.startswith("./") or name.startswith("../")
    tried = ["the current directory"]
    if not explicit:
        bases = [b for b in os.environ.get("ADAPT_DATA_PATH", "").split(":") if b] + [ROOT]
        for b in bases:
            for d in (os.path.join(b, "experiments", subdir), b):
                for n in names:
                    if os.path.isfile(os.path.join(d, n)):
                        return os.path.join(d, n)
                tried.append(d)
    die("%s: no such %s (looked in %s; ADAPT_DATA_PATH adds folders)"
        % (name, what, ", ".join(tried)))


def read_runlist(path):
    path = find_file(path, "runlists", ".txt", "run list")
    runs = []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        die("%s: cannot read the run list: %s" % (path, e.strerror))
    names = set()
    for no, line in enumerate(lines, 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            die("%s:%d: %s" % (path, no, e))
        if not words:
            continue
        if len(words) < 2:
            die("%s:%d: expected NAME CONFIG.ini [--set section.key=value ...]" % (path, no))
        name, config, extra = words[0], words[1], words[2:]
        if not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            die("%s:%d: run name '%s' must be letters, digits, '_', '-', '.'" % (path, no, name))
        if name in names:
            die("%s:%d: run name '%s' appears twice" % (path, no, name))
        names.add(name)
        # a path from the tree's (or installed data folder's) root, as the shipped lists
        # write them; else as adapt-train --config finds a configuration
        cfg = config if os.path.isabs(config) else os.path.join(ROOT, config)
        if not os.path.isfile(cfg):
            if not os.path.isfile(os.path.join(os.path.dirname(path), config)) and \
                    not os.path.isfile(config) and "/" in config:
                die("%s:%d: configuration %s not found (paths in a run list are from %s, the "
                    "list's folder or the current directory)" % (path, no, config, ROOT))
            for c in (os.path.join(os.path.dirname(path), config), config):
                if os.path.isfile(c):
                    cfg = os.path.abspath(c)
                    break
            else:
                cfg = os.path.abspath(find_file(config, "configs", ".ini", "configuration"))
        i = 0
        while i < len(extra):
            if extra[i] != "--set" or i + 1 >= len(extra) or "=" not in extra[i + 1]:
                die("%s:%d: after the configuration only --set section.key=value may follow"
                    % (path, no))
            i += 2
        runs.append((name, cfg, extra))
    if not runs:
        die("%s: no runs" % path)
    return runs


def program(args, name):
    p = os.path.join(args.bin, name)
    if os.access(p, os.X_OK):
        return p
    found = shutil.which(name)  # an installed adapt-sim
    if found:
        return found
    die("%s not found or not executable, nor %s on PATH (build first, or pass --bin DIR)"
        % (p, name))


def write_commands(args, runs):
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    train = program(args, "adapt-train")
    lines = []
    for name, cfg, extra in runs:
        rd = os.path.join(out, "runs", name)
        cmd = [train, "--config", cfg, "--out", rd, "--quiet", "--set", "run.name=" + name] + extra
        if getattr(args, "threads", 0):
            cmd += ["--set", "run.threads=%d" % args.threads]
        for kv in getattr(args, "set", None) or []:
            cmd += ["--set", kv]
        q = " ".join(shlex.quote(c) for c in cmd)
        # continue from a checkpoint; replace a run that died before its first one
        lines.append("d=%s; f=; if [ -f \"$d/model.safetensors\" ]; then f=--resume; "
                     "elif [ -d \"$d\" ]; then f=--force; fi; exec %s $f" % (shlex.quote(rd), q))
    path = os.path.join(out, "commands.txt")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def cmd_run(args):
    run_all(args, read_runlist(args.runlist))


def run_all(args, runs):
    commands = write_commands(args, runs)
    out = os.path.abspath(args.out)
    parallel = shutil.which("parallel")
    if len(runs) > 1 and parallel:
        cmd = [parallel, "--jobs", str(args.jobs), "--joblog", os.path.join(out, "joblog"),
               "--resume-failed", "--halt", "never"]
        print(PROG + ": %d runs with GNU parallel (%d at a time), log %s/joblog"
              % (len(runs), args.jobs, out))
        with open(commands) as f:
            rc = subprocess.call(cmd, stdin=f)
        if rc != 0:
            die("%d run(s) failed (see %s/joblog; run again to retry them)" % (rc, out))
        return
    if len(runs) > 1:
        print(PROG + ": GNU parallel not found: running %d runs one after another" % len(runs))
    failed = []
    with open(commands) as f:
        for (name, _, _), line in zip(runs, f):
            print(PROG + ": run %s" % name, flush=True)
            if subprocess.call(["bash", "-c", line]) != 0:
                failed.append(name)
    if failed:
        die("failed runs: %s" % ", ".join(failed))


def find_traces(items):
    traces = []
    for it in items:
        if os.path.isdir(it):
            t = os.path.join(it, "trace.jsonl")
            found = [t] if os.path.isfile(t) else \
                sorted(glob.glob(os.path.join(it, "runs", "*", "trace.jsonl")))
            if not found:
                found = sorted(glob.glob(os.path.join(it, "*", "trace.jsonl")))
            if not found:
                die("%s: no trace.jsonl in it, in runs/*/ or in */" % it)
            traces += found
        elif os.path.isfile(it):
            traces.append(it)
        else:
            die("%s: no such trace or directory" % it)
    return traces


def trace_records(path):
    """The complete lines of a trace (a live run's last line may be cut), parsed."""
    with open(path) as f:
        for no, line in enumerate(f, 1):
            if not line.endswith("\n"):
                break
            try:
                yield json.loads(line)
            except ValueError:
                die("%s:%d: malformed JSON" % (path, no))


def trace_info(path):
    """Header fields and the metrics worth a heatmap: WL always, FL when it
    changes, lookback, resolution and sparsity when recorded; each metric's
    least and greatest value; each unit's (WL, FL) when it never changes
    (formats: None when one changes, as a dictionary of all of it)."""
    policy, model, dataset, metrics = "?", "?", "?", {"wl"}
    label, compat = run_name(path), ""
    header = {}
    fl_seen = None
    ranges = {}
    formats = None
    constant = True
    epochs = 0
    for rec in trace_records(path):
        if rec.get("type") == "header":
            header = rec
            policy = rec.get("policy", "?")
            model = rec.get("model", {}).get("name", "?")
            dataset = rec.get("dataset", {}).get("name", "?")
            label, compat = run_label(rec, path)
        elif rec.get("type") == "epoch":
            epochs += 1
        elif rec.get("type") == "step":
            units = rec.get("units", [])
            state = [(u.get("wl"), u.get("fl")) for u in units]
            if formats is None:
                formats = state
            elif state != formats:
                constant = False
            for u in units:
                metrics.update(k for k in ("lb", "r", "sparsity") if k in u)
                if fl_seen is None:
                    fl_seen = u.get("fl")
                elif u.get("fl") != fl_seen:
                    metrics.add("fl")
                for k in METRICS:
                    v = u.get(k)
                    if isinstance(v, (int, float)) and not (k == "r" and v < 0):
                        lo, hi = ranges.get(k, (v, v))
                        ranges[k] = (min(lo, v), max(hi, v))
    return {"policy": policy, "model": model, "dataset": dataset,
            "metrics": [m for m in METRICS if m in metrics], "label": label, "compat": compat,
            "ranges": ranges, "formats": formats if constant else None, "header": header,
            "epochs": epochs}


def format_name(info, wl, fl):
    """A unit's number format in words: float32 for fp32, the half type for amp, MuPPET's
    word length (its quantizer scales each tensor), <WL,FL> for fixed point."""
    cfg = (info["header"].get("config") or {}).get("policy", {})
    if info["policy"] == "fp32":
        return "float32"
    if info["policy"] == "amp":
        return md(cfg.get("amp_type", "fp16"))
    if info["policy"] == "muppet":
        return "float32" if wl >= 32 else "%d-bit MuPPET fixed point (a scale per tensor)" % wl
    fmt = cfg.get("format", "fixed")
    return "`<%d,%d>`" % (wl, fl) if fmt == "fixed" else "%s (WL %d)" % (md(fmt), wl)


def constant_line(info):
    """The README's line for a run whose formats never change, None for any other run:
    "fixed16: every unit <16,8> for the whole run", or the format of each unit."""
    if not info["formats"]:
        return None
    names = [format_name(info, wl, fl) for wl, fl in info["formats"]]
    if info["policy"] == "comp":  # the chosen plan's format of each unit's layer
        layers = info["header"]["model"]["layers"]
        names = [md(layers[u["layer"]].get("precision", "float32"))
                 for u in info["header"].get("units", [])]
    if len(set(names)) == 1:
        what = "every unit %s" % names[0]
    else:
        units = [u.get("name", str(i)) for i, u in enumerate(info["header"].get("units", []))]
        units += [str(i) for i in range(len(units), len(names))]
        what = ", ".join("unit %s %s" % (md(u), n) for u, n in zip(units, names))
    return "%s: %s for the whole run" % (md(info["label"]), what)


def comp_search_line(path):
    """For a comp run: the plan its search chose and what it sampled; None otherwise."""
    samples = []
    with open(path) as f:
        for line in f:
            if '"type":"sample"' in line:
                samples.append(json.loads(line))
            elif '"type":"step"' in line:
                break
    if not samples:
        return None
    chosen = [s["plan"] for s in samples if s["chosen"]]
    s1 = [s for s in samples if s["stage"] == 1]
    n2 = len(samples) - len(s1)
    return ("Plan search: %d stage-1 plan%s trained (%d optimizer steps, %d safe), %d stage-2 "
            "plan%s run for one batch; chosen plan %s (one digit per layer, the last digit "
            "float32)." % (len(s1), "s" if len(s1) != 1 else "", sum(s["steps"] for s in s1),
                           sum(s["safe"] for s in s1), n2, "s" if n2 != 1 else "",
                           md_code(chosen[-1] if chosen else "?")))


def drawn_metrics(info):
    """The metrics of a run's heatmaps: its word length and every other recorded metric that
    changes during the run (a heatmap of one colour says nothing), except that a run whose
    formats never change (its one line says them) gets only the policy state that changes
    (an AdaPT run that never left its start format still adapts its lookback and
    resolution)."""
    def varies(m):
        return m in info["ranges"] and info["ranges"][m][1] > info["ranges"][m][0]
    if not constant_line(info):
        return [m for m in info["metrics"] if m == "wl" or varies(m)]
    return [m for m in info["metrics"] if m in ("lb", "r") and varies(m)]


def nice_range(lo, hi):
    """(lo, hi) widened outward to a round step a tenth of the span's order of magnitude:
    lookback 25.2849 to 63.9531 becomes 25 to 64; integers stay as they are."""
    if hi <= lo or (float(lo).is_integer() and float(hi).is_integer()):
        return lo, hi
    step = 10.0 ** (math.floor(math.log10(hi - lo)) - 1)
    a, b = math.floor(lo / step) * step, math.ceil(hi / step) * step
    digits = max(0, -int(math.floor(math.log10(step))))
    return round(a, digits), round(b, digits)


def shared_scales(infos):
    """Per metric, the (least, greatest) value over the runs that get heatmaps of it, widened
    to round numbers: the colour scale all their heatmaps share."""
    scales = {}
    for info in infos:
        for m in drawn_metrics(info):
            if m in info["ranges"]:
                lo, hi = info["ranges"][m]
                a, b = scales.get(m, (lo, hi))
                scales[m] = (min(a, lo), max(b, hi))
    return {m: nice_range(*r) for m, r in scales.items()}


def scale_args(scales, m):
    """adapt-heatmap's --vmin/--vmax for metric m (none for a single value: the program
    draws it on the metric's own range, the same for every run)."""
    lo, hi = scales.get(m, (0, 0))
    return ["--vmin", "%r" % lo, "--vmax", "%r" % hi] if hi > lo else []


def run_name(path):
    """The trace's folder (file names of its pictures)."""
    d, f = os.path.split(os.path.abspath(path))
    return os.path.basename(d) if f == "trace.jsonl" else os.path.splitext(f)[0]


def location(path):
    """A run's place as path components (as adapt-perf's perf_runs_label): the folder of
    DIR/trace.jsonl, else the trace's path without its extension; empty and "." left out."""
    d, f = os.path.split(path)
    loc = d if f == "trace.jsonl" and d else os.path.splitext(path)[0]
    return [c for c in loc.split("/") if c not in ("", ".")]


def path_ends(names, paths):
    """For runs named `names` at `paths`, the components that tell apart runs of one name (as
    adapt-perf's perf_runs_label): the fewest trailing components of the run's location that
    no other run of that name has (runs at the same location are passed over); None for a
    name no other run has."""
    locs = [location(p) for p in paths]
    ends = []
    for i, (name, loc) in enumerate(zip(names, locs)):
        others = [locs[j] for j in range(len(names)) if j != i and names[j] == name and locs[j]]
        if not loc or not others:
            ends.append(None)
            continue
        k = 1
        while k < len(loc) and any(o != loc and o[-k:] == loc[-k:] for o in others):
            k += 1
        ends.append(loc[-k:])
    return ends


def tell_apart(names, paths):
    """The labels of runs named `names` at `paths`: "NAME (END)" with END the path_ends joined
    by '/' for a name that other runs share, the name alone when it is unique."""
    return [n if e is None else "%s (%s)" % (n, "/".join(e))
            for n, e in zip(names, path_ends(names, paths))]


def run_label(header, path):
    """The name adapt-perf gives a run: its run.name when set; else its configuration file's
    stem, then [reference] for AdaPT's reference variant and the seed when not 1; the folder
    when the run had no configuration file. Also the compat mode."""
    compat = ""
    if header.get("policy") == "adapt":
        compat = (header.get("config") or {}).get("quantization", {}).get("compat", "corrected")
    name = ((header.get("config") or {}).get("run") or {}).get("name")
    if isinstance(name, str) and name:
        return name, compat
    cf = header.get("config_file") or ""
    if not cf:
        return run_name(path), compat
    label = os.path.basename(cf)
    if label.endswith(".ini"):
        label = label[:-4]
    if compat == "reference":
        label += " [reference]"
    if header.get("seed", 1) != 1:
        label += " seed %d" % header["seed"]
    return label, compat


def check(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        die("%s failed:\n  %s\n%s"
            % (what, " ".join(shlex.quote(c) for c in cmd), p.stderr.strip()))
    for line in p.stderr.strip().splitlines():
        if line not in WARNED:
            WARNED.add(line)
            print(line, file=sys.stderr)
    return p.stdout


BUILD_KEYS = ("commit", "compiler", "cpu", "isa", "blas", "device")


def build_tuple(b):
    """a "build" object (a trace header's, or one of an accum.json's "builds") as a tuple of
    BUILD_KEYS, or None when it is not an object (older traces and files do not record it)"""
    return tuple(str(b.get(k, "?")) for k in BUILD_KEYS) if isinstance(b, dict) else None


def build_of(header):
    """the machine and build a trace header records ("build"), as build_tuple gives it"""
    return build_tuple(header.get("build")) if isinstance(header, dict) else None


def machines(builds):
    """letters for the distinct builds among `builds` (tuples of build_of, or None for a run
    that does not record its machine: "?"), in order of first appearance: ({build: letter},
    Markdown lines that describe them). One machine: one sentence; several, or one and runs
    that do not say: a table and why it matters."""
    seen = []
    for b in builds:
        if b not in seen:
            seen.append(b)
    known = [b for b in seen if b is not None]
    letter = {b: chr(ord("A") + i) if i < 26 else "M%d" % (i + 1) for i, b in enumerate(known)}
    if None in seen:
        letter[None] = "?"

    def describe(b):
        d = dict(zip(BUILD_KEYS, b))
        return "%s (%s), %s, device %s; commit %s, %s" % (
            d["cpu"], d["isa"], d["blas"], d["device"], d["commit"], d["compiler"])
    if not known:
        return letter, ["The runs' traces do not record their machine (written before trace "
                        "headers had a \"build\").", ""]
    if len(seen) == 1:
        return letter, ["Every run's machine and build (trace header \"build\"): %s." %
                        md(describe(known[0])), ""]
    lines = ["Runs come from %d machine%s or build%s (trace header \"build\")%s. Float32 "
             "arithmetic sums in an order that depends on the CPU (the BLAS library's kernels "
             "and the hot loops' instruction set), so runs of different machines can part in "
             "their last bits and then in their accuracy; compare runs of one machine "
             "(doc/running.md, \"What a run records about its machine\")." % (
                 len(known), "s" if len(known) > 1 else "", "s" if len(known) > 1 else "",
                 ", and some (?) do not record theirs, which may be any" if None in seen else ""),
             "", "| machine | CPU, BLAS, device; build |", "|---|---|"]
    for b in known:
        lines.append("| %s | %s |" % (letter[b], md(describe(b))))
    if None in seen:
        lines.append("| ? | not recorded (a trace written before trace headers had a "
                     "\"build\") |")
    return letter, lines + [""]


def read_notes(path):
    """The text of --notes FILE (None without it), refused before anything is written when
    the file cannot be read or is not UTF-8 text."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as e:
        die("--notes %s: cannot read it: %s" % (path, e.strerror))
    except UnicodeDecodeError as e:
        die("--notes %s: not UTF-8 text (byte %d)" % (path, e.start))
    if not text:
        die("--notes %s: the file is empty (expected Markdown text)" % path)
    return text


def cmd_build(args):
    notes = read_notes(args.notes)
    traces = find_traces(args.traces)
    # pictures are named by the trace's folder, or by the end of its path that tells it apart
    names = [run_name(t) for t in traces]
    names = [n if e is None else "_".join(e) for n, e in zip(names, path_ends(names, traces))]
    if len(set(names)) != len(names):
        die("two traces share a run name: %s" % ", ".join(names))
    perf, heat = program(args, "adapt-perf"), program(args, "adapt-heatmap")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    # pictures go to a fresh folder that replaces pictures/ once all are drawn
    pics = os.path.join(out, "pictures.new")
    shutil.rmtree(pics, ignore_errors=True)
    os.makedirs(pics)
    base = ["--baseline", args.baseline] if args.baseline else []
    hw = ["--hw", args.hw] if args.hw else []
    table = check([perf, "--format", "markdown"] + base + hw + traces, "adapt-perf")
    paper = check([perf, "--format", "markdown", "--paper-compat"] + base + hw + traces,
                  "adapt-perf --paper-compat")
    units = check([perf, "--format", "markdown", "--per-unit"] + base + traces,
                  "adapt-perf --per-unit")
    for fmt, ext in (("markdown", "md"), ("csv", "csv"), ("json", "json")):
        check([perf, "--format", fmt, "-o", os.path.join(out, "table." + ext)] + base + hw + traces,
              "adapt-perf --format " + fmt)
    infos = [trace_info(t) for t in traces]
    for info, label in zip(infos, tell_apart([info["label"] for info in infos], traces)):
        info["label"] = label
    scales = shared_scales(infos)
    sections = []
    for t, name, info in zip(traces, names, infos):
        pictures = []
        fixed = constant_line(info)
        if not fixed and "wl" in info["metrics"]:
            # the share of training steps at each word length, per unit
            for ext in ("png", "svg", "pdf"):
                f = os.path.join(pics, "%s_wldist.%s" % (name, ext))
                check([heat, "--wl-dist", t, "-o", f], "adapt-heatmap --wl-dist")
            pictures.append("wldist")
        for m in drawn_metrics(info):
            for ext in ("png", "svg", "pdf"):
                f = os.path.join(pics, "%s_%s.%s" % (name, m, ext))
                check([heat, t, "--metric", m] + scale_args(scales, m) + ["-o", f],
                      "adapt-heatmap")
            pictures.append(m)
        sections.append((name, t, info["policy"], info["model"], info["dataset"], pictures,
                         info["label"], info["compat"], fixed))
    for ext in ("png", "svg", "pdf"):
        check([heat, "--cost-curve"] + traces + ["-o", os.path.join(pics, "cost_curve." + ext)],
              "adapt-heatmap --cost-curve")
    # loss and accuracy per epoch of the runs that have epoch records
    with_epochs = [t for t, info in zip(traces, infos) if info["epochs"] > 0]
    if with_epochs:
        for ext in ("png", "svg", "pdf"):
            check([heat, "--accuracy"] + with_epochs +
                  ["-o", os.path.join(pics, "accuracy." + ext)], "adapt-heatmap --accuracy")

    cmdline = " ".join(shlex.quote(a) for a in ["experiments/report.py"] + sys.argv[1:])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# %s" % (args.title or "adapt-sim report"), "",
          "Generated %s by" % when, "", "    " + cmdline, "",
          "from the traces below; the same command regenerates it (pictures in `pictures/`,",
          "PNG, SVG and PDF; the table also as `table.csv` and `table.json`).", "",
          "Runs are named by their run.name (the run list's NAME), else by their",
          "configuration file ([reference]: AdaPT's reference variant; the seed when it is",
          "not 1); runs that would share a name get the end of their path that tells them",
          "apart in parentheses.", "",
          "| run | policy | compat | model | data set | trace |", "|---|---|---|---|---|---|"]
    for name, t, policy, model, dataset, _, label, compat, _ in sections:
        lines.append("| %s | %s | %s | %s | %s | %s |"
                     % (md(label), md(policy), md(compat or "-"), md(model), md(dataset),
                        md_code(os.path.relpath(t, out))))
    builds = [build_of(info["header"]) for info in infos]
    letter, mlines = machines(builds)
    if len(letter) > 1:  # a column: the machine of each run
        top = len(lines) - len(infos) - 2
        lines[top] += " machine |"
        lines[top + 1] += "---|"
        for i, b in enumerate(builds):
            lines[top + 2 + i] += " %s |" % letter[b]
    lines += [""] + mlines[:-1]
    lines += ["", "## Comparison", "", table.rstrip(), "",
           "### In the AdaPT paper's convention (SU = 2 C32 / (Cq + C32)), with the reference",
           "analysis' SU2 ref and SU3", "", paper.rstrip(), ""]
    if notes:
        lines += ["## Reading the numbers", "", notes, ""]
    lines += [
           "## Training cost relative to float32", "",
           "![cost curve](pictures/cost_curve.png)", "",
           "([SVG](pictures/cost_curve.svg), [PDF](pictures/cost_curve.pdf))", ""]
    if with_epochs:
        lines += ["## Loss and accuracy per epoch", "",
               "![loss and accuracy](pictures/accuracy.png)", "",
               "([SVG](pictures/accuracy.svg), [PDF](pictures/accuracy.pdf))", ""]
    lines += ["## Per-unit formats", ""]
    fixed = [sec[8] for sec in sections if sec[8]]
    if fixed:
        lines += ["Runs whose per-unit formats never change (no word-length heatmap; an "
                  "AdaPT run's lookback and resolution are drawn where they change):", ""]
        lines += ["- " + line for line in fixed] + [""]
    drawn = [m for m in METRICS if any(m in sec[5] for sec in sections)]
    if drawn:
        lines += ["The heatmaps of one metric share one colour scale, its range over the runs "
               "drawn: " + "; ".join(("%s %g to %g" % ((m,) + scales[m]))
                                     if scales[m][1] > scales[m][0] else
                                     "%s %g in every run" % (m, scales[m][0])
                                     for m in drawn if m in scales) + ".", ""]
    for name, t, policy, model, dataset, pictures, label, compat, line in sections:
        if not pictures:
            continue
        lines += ["### %s (%s%s)" % (md(label), md(policy), ", " + md(compat) if compat else ""),
                  ""]
        if line:  # "label: every unit ..." as a sentence
            what = line[len(md(label)) + 2:]
            lines += [what[0].upper() + what[1:] + ".", ""]
        search = comp_search_line(t)
        if search:
            lines += [search, ""]
        for m in pictures:
            if m == "wldist":
                lines += ["Share of the training steps at each word length, per unit:", ""]
            pic = "pictures/" + urllib.parse.quote("%s_%s" % (name, m))
            lines += ["![%s %s](%s.png)" % (md(name), m, pic), "",
                      "([SVG](%s.svg), [PDF](%s.pdf))" % (pic, pic), ""]
    lines += ["## Per-unit costs", "", units.rstrip(), ""]
    final = os.path.join(out, "pictures")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(pics, final)
    tmp = os.path.join(out, "README.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, os.path.join(out, "README.md"))
    print(PROG + ": wrote %s/README.md (%d runs)" % (out, len(traces)))


def cmd_all(args):
    read_notes(args.notes)  # a bad --notes is refused before hours of training
    cmd_run(args)
    args.traces = [os.path.join(args.out, "runs")]
    cmd_build(args)


def cmd_slurm(args):
    runs = read_runlist(args.runlist)
    commands = write_commands(args, runs)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "slurm"), exist_ok=True)
    lines = ["#!/bin/bash",
             "# Slurm job array for %s (%d runs), generated by experiments/report.py."
             % (args.runlist, len(runs)),
             "# Submit: sbatch THIS_FILE; afterwards: " +
             ("adapt-report" if PROG == "adapt-report" else "experiments/report.py") +
             " build %s/runs --out %s"
             % (shlex.quote(out), shlex.quote(out)),
             "#SBATCH --job-name=adapt-sim",
             "#SBATCH --array=0-%d%s"
             % (len(runs) - 1, "%%%d" % args.max_parallel if args.max_parallel else ""),
             "#SBATCH --cpus-per-task=%d" % args.cpus,
             "#SBATCH --time=%s" % args.time,
             "#SBATCH --output=%s/slurm/%%A_%%a.out" % out]
    if args.partition:
        lines.append("#SBATCH --partition=%s" % args.partition)
    lines += ["set -euo pipefail",
              "cd %s" % shlex.quote(ROOT),
              "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-%d}" % args.cpus,
              "line=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" %s)" % shlex.quote(commands),
              "exec bash -c \"$line\"", ""]
    sys.stdout.write("\n".join(lines))


def print_version(args):
    """'adapt-report (adapt-sim) VERSION', the version of the adapt-train it runs, then that
    program's build lines."""
    train = program(args, "adapt-train")
    p = subprocess.run([train, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = p.stdout.decode(errors="replace").splitlines()
    if p.returncode != 0 or not lines or " (adapt-sim) " not in lines[0]:
        die("%s --version failed (exit %d)" % (train, p.returncode))
    print("%s (adapt-sim) %s" % (PROG, lines[0].split(" (adapt-sim) ", 1)[1]))
    print("programs:   %s" % os.path.dirname(train))
    for line in lines[1:]:
        print(line)


# ---------------------------------------------------------------------------------------------
# ablation: the published AdaPT code's behaviours ([reference] switches) turned off one at a time

def dry_run_resolved(args, config, sets, compat):
    """{section: {key: value}} from the "resolved:" lines of adapt-train's dry run of config
    with quantization.compat = compat: the values its auto settings take."""
    cmd = [program(args, "adapt-train"), "--config", config, "--dry-run"]
    for kv in sets + ["quantization.compat=" + compat]:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.decode(errors="replace")
    out = {}
    for line in text.splitlines():
        m = re.match(r"resolved: \[(\w+)\] (.*)$", line)
        if m:
            out[m.group(1)] = dict(kv.strip().split(" = ", 1)
                                   for kv in m.group(2).split(",") if " = " in kv)
    if p.returncode != 0 or "reference" not in out or "quantization" not in out:
        die("%s: no resolved [quantization] and [reference] settings in the dry run %s (%s)"
            % (config, " ".join(shlex.quote(c) for c in cmd),
               text.strip().splitlines()[-1] if text.strip() else "no output"))
    return out


def ablation_settings(args, config, sets):
    """The ablation's switches: the keys of [reference], and the [quantization] settings whose
    value quantization.compat decides, name -> (value under corrected, under reference), both
    as adapt-train resolves them for this configuration."""
    ref = dry_run_resolved(args, config, sets, "reference")
    corr = dry_run_resolved(args, config, sets, "corrected")
    compat = {k: (corr["quantization"].get(k), v)
              for k, v in ref["quantization"].items() if corr["quantization"].get(k) != v}
    return list(ref["reference"]), compat


def switch_setting(name, on, compat):
    """The --set that turns an ablation switch on (as the reference has it) or off."""
    if name in compat:
        corrected, reference = compat[name]
        return "quantization.%s=%s" % (name, reference if on else corrected)
    return "reference.%s=%s" % (name, "on" if on else "off")


def variant_names(switches, each):
    """The names of ablation_variants' variants, in its order."""
    if each == "on":
        return ["corrected"] + ["with_" + k for k in switches] + ["reference"]
    return ["reference"] + ["no_" + k for k in switches] + ["corrected"]


def ablation_variants(switches, compat, each="off"):
    """(name, --set list). each = off: the reference with every switch, each switch off alone,
    corrected; each = on: corrected, corrected with each switch on alone, the reference."""
    ref = ["--set", "quantization.compat=reference"]
    corr = ["--set", "quantization.compat=corrected"]
    on = each == "on"
    base, other = (corr, ref) if on else (ref, corr)
    sets = [base] + [base + ["--set", switch_setting(k, on, compat)] for k in switches] + [other]
    return list(zip(variant_names(switches, each), sets))


def trace_summary(path):
    """Test accuracy, mean WL (over step records and units), the units at 32 bits in the last
    step record, the first step at which a unit was at 32 bits, final mean sparsity."""
    acc, wl_sum, wl_n, at32, first32, spars, last = None, 0.0, 0, 0, None, None, None
    for rec in trace_records(path):
        t = rec.get("type")
        if t == "test":
            acc = rec.get("test_acc")
        elif t == "step":
            units = rec.get("units", [])
            wls = [u.get("wl") for u in units if isinstance(u.get("wl"), (int, float))]
            wl_sum += sum(wls)
            wl_n += len(wls)
            if first32 is None and any(w >= 32 for w in wls):
                first32 = rec.get("step")
            last = units
    if last is not None:
        at32 = sum(1 for u in last if (u.get("wl") or 0) >= 32)
        sp = [u.get("sparsity") for u in last if isinstance(u.get("sparsity"), (int, float))]
        spars = sum(sp) / len(sp) if sp else None
    return {"test_acc": acc, "mean_wl": wl_sum / wl_n if wl_n else None, "at32": at32,
            "first32": first32, "sparsity": spars}


def su1_of(args, traces):
    cmd = [program(args, "adapt-perf")] + traces + ["--format", "json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        die("adapt-perf failed on the ablation's traces: %s"
            % p.stderr.decode(errors="replace").strip())
    runs = json.loads(p.stdout.decode()).get("runs", [])
    return {os.path.abspath(r["path"]): r.get("su1") for r in runs}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, f):
    return "-" if x is None else f % x


ABLATION_SEED_KEYS = ("seed", "test_acc", "mean_wl", "at32", "first32", "sparsity", "su1")


def ablation_merged(path, config, sets, switches, each):
    """(variant, the summary of one seed) for every seed of an earlier ablation.json of the same
    configuration, settings and --each whose switches are among `switches`: its per_seed
    lists, or, in a file from before they were written, the one seed of a single-seed table
    (whose means are that seed's values)"""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        die("%s: not a readable ablation.json (%s)" % (path, e))
    if not isinstance(j, dict) or not isinstance(j.get("rows"), list):
        die("%s: no \"rows\" list (expected the ablation.json of `report.py ablation`)" % path)
    # a file from before --each is an ablation of each switch off
    have = dict(j, each=j.get("each", "off"))
    for key, want in (("config", config), ("sets", sets), ("each", each)):
        if have.get(key) != want:
            die("%s: \"%s\" is %s, this ablation's is %s: only an ablation of the same "
                "configuration, settings and --each merges" % (
                    path, key, json.dumps(have.get(key)), json.dumps(want)))
    theirs = have.get("switches")
    if not isinstance(theirs, list) or any(k not in switches for k in theirs):
        die("%s: \"switches\" is %s, not among this ablation's %s: only an ablation of "
            "some of the same switches merges" % (path, json.dumps(theirs), json.dumps(switches)))
    got = [r.get("variant") if isinstance(r, dict) else None for r in j["rows"]]
    if got != variant_names(theirs, each):
        die("%s: variants %s, expected those of switches %s" % (
            path, json.dumps(got), json.dumps(theirs)))
    out = []
    for i, r in enumerate(j["rows"]):
        where = "%s: rows[%d] (%s)" % (path, i, r["variant"])
        ps = r.get("per_seed")
        if ps is None:
            seeds = j.get("seeds")
            if not (isinstance(seeds, list) and len(seeds) == 1 and r.get("seeds") == 1):
                die("%s: no \"per_seed\" list, and more than one seed: the seeds cannot be "
                    "told apart (rebuild that ablation with this report.py)" % where)
            ps = [{"seed": seeds[0], "test_acc": r.get("acc_mean"), "mean_wl": r.get("mean_wl"),
                   "at32": r.get("at32"), "first32": r.get("first32"),
                   "sparsity": r.get("sparsity"), "su1": r.get("su1")}]
        if not isinstance(ps, list):
            die("%s: \"per_seed\" is not a list" % where)
        for d in ps:
            if not isinstance(d, dict) or not isinstance(d.get("seed"), int) or \
                    isinstance(d.get("seed"), bool):
                die("%s: a per-seed entry without an integer \"seed\"" % where)
            for k in ABLATION_SEED_KEYS[1:]:
                v = d.get(k)
                if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
                    die("%s, seed %d: \"%s\" is %r, expected a number or null" %
                        (where, d["seed"], k, v))
            acc = d.get("test_acc")
            if acc is not None and not 0 <= acc <= 1:
                die("%s, seed %d: test accuracy %r is not a fraction in [0, 1]" %
                    (where, d["seed"], acc))
            out.append((r["variant"], {k: d.get(k) for k in ABLATION_SEED_KEYS}))
    return out


def cmd_ablation(args):
    seeds = []
    for w in args.seeds.split(","):
        try:
            seeds.append(int(w))
        except ValueError:
            die("--seeds expects integers separated by commas, got '%s'" % args.seeds)
    config = os.path.abspath(find_file(args.config, "configs", ".ini", "configuration"))
    sets = args.set or []
    refs, compat = ablation_settings(args, config, sets)
    known = refs + list(compat)
    switches = args.switches.split(",") if args.switches else known
    for k in switches:
        if k not in known:
            die("--switches: '%s' is neither a key of the [reference] section of %s nor a "
                "setting quantization.compat decides there (%s)"
                % (k, config, ", ".join(compat) or "none"))
    variants = ablation_variants(switches, compat, args.each)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    # the configuration relative to the repository root where it lies inside it (as run lists
    # take it)
    shown = os.path.relpath(config, ROOT) if config.startswith(ROOT + os.sep) else config
    # the earlier tables, checked before any run starts: variant -> seed -> summary
    per = {name: {} for name, _ in variants}
    for m in args.merge or []:
        for name, d in ablation_merged(m, shown, sets, switches, args.each):
            have = per[name].get(d["seed"])
            if have is not None and have != d:
                die("%s: seed %d of %s differs from that of an earlier --merge; a variant "
                    "and seed is merged from one file, or from files that agree" %
                    (m, d["seed"], name))
            per[name][d["seed"]] = d
    # the runs: every variant and seed that no merged file holds
    runs = [("%s_s%d" % (name, seed), config, extra + ["--set", "run.seed=%d" % seed])
            for name, extra in variants for seed in seeds if seed not in per[name]]
    # the run list, for the record
    with open(os.path.join(out, "ablation.txt"), "w") as f:
        for m in args.merge or []:
            f.write("# merged: %s\n" % m)
        for name, cfg, extra in runs:
            every = [w for kv in sets for w in ("--set", kv)]
            f.write("%s %s %s\n" % (name, shlex.quote(shown),
                                    " ".join(shlex.quote(e) for e in extra + every)))
    if runs and not args.table_only:
        run_all(args, runs)
    traces = {}
    for name, _, _ in runs:
        t = os.path.join(out, "runs", name, "trace.jsonl")
        if not os.path.isfile(t):
            die("%s: missing (run the ablation without --table-only first)" % t)
        traces[name] = t
    su1 = su1_of(args, list(traces.values())) if traces else {}
    for name, _ in variants:
        for seed in seeds:
            t = traces.get("%s_s%d" % (name, seed))
            if t is None:  # from a merged file
                continue
            d = trace_summary(t)
            d["su1"] = su1.get(os.path.abspath(t))
            d["seed"] = seed
            per[name][seed] = d
    per = {name: [per[name][k] for k in sorted(per[name])] for name in per}
    seeds = [d["seed"] for d in per[variants[0][0]]]
    rows = []
    for name, _ in variants:
        ps = per[name]
        if [d["seed"] for d in ps] != seeds:
            die("the seeds of %s (%s) are not those of %s (%s): run the ablation with --seeds "
                "%s to complete them" % (
                    name, ",".join(str(d["seed"]) for d in ps), variants[0][0],
                    ",".join(map(str, seeds)),
                    ",".join(str(k) for k in sorted(set(seeds) | {d["seed"] for d in ps}))))
        accs = [d["test_acc"] for d in ps if d["test_acc"] is not None]
        firsts = [d["first32"] for d in ps if d["first32"] is not None]
        rows.append({"variant": name, "seeds": len(ps),
                     "acc_mean": mean(accs), "acc_min": min(accs) if accs else None,
                     "acc_max": max(accs) if accs else None,
                     "accs": [d["test_acc"] for d in ps],
                     "mean_wl": mean([d["mean_wl"] for d in ps]),
                     "at32": mean([d["at32"] for d in ps]),
                     "first32": sorted(firsts)[len(firsts) // 2] if firsts else None,
                     "first32_runs": len(firsts),
                     "sparsity": mean([d["sparsity"] for d in ps]),
                     "su1": mean([d["su1"] for d in ps]),
                     "per_seed": [{k: d[k] for k in ABLATION_SEED_KEYS} for d in ps]})
    with open(os.path.join(out, "ablation.json"), "w") as f:
        json.dump({"config": shown, "sets": sets, "seeds": seeds, "switches": switches,
                   "each": args.each, "rows": rows}, f, indent=1)
    lines = ["| variant | test acc % mean | min - max | per seed | mean WL | units at 32 bits "
             "(end) | first step at 32 bits (median; runs) | sparsity | SU1 |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        pct = lambda x: fmt(None if x is None else 100 * x, "%.2f")
        lines.append("| %s | %s | %s - %s | %s | %s | %s | %s (%d of %d) | %s | %s |" % (
            md(r["variant"]), pct(r["acc_mean"]), pct(r["acc_min"]), pct(r["acc_max"]),
            " / ".join(pct(a) for a in r["accs"]), fmt(r["mean_wl"], "%.2f"),
            fmt(r["at32"], "%.1f"), fmt(r["first32"], "%d"), r["first32_runs"], r["seeds"],
            fmt(r["sparsity"], "%.3f"), fmt(r["su1"], "%.2f")))
    seed_word = "seeds" if len(seeds) > 1 else "seed"
    with open(os.path.join(out, "ablation.md"), "w") as f:
        what = ("`quantization.compat = corrected`, corrected with each [reference] switch "
                "on alone (`with_NAME`), and the reference with every switch on"
                if args.each == "on" else
                "`quantization.compat = reference` with every [reference] switch on, each "
                "switch off alone (`no_NAME`), and corrected")
        f.write("Ablation of %s, %s %s: %s.\n\n" % (
                    md(shown), seed_word, ", ".join(map(str, seeds)), what) +
                ("Settings: %s.\n\n" % md(" ".join("--set " + kv for kv in sets)) if sets else "") +
                "\n".join(lines) + "\n")
    print("\n".join(lines))
    ablation_figure(rows, os.path.join(out, "ablation.png"),
                    "%s, %s %s%s" % (os.path.basename(config), seed_word, ",".join(map(str, seeds)),
                                     ", each switch on alone" if args.each == "on" else ""))
    print(PROG + ": %s/ablation.md, ablation.json, ablation.png" % out)


def ablation_figure(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not importable by %s: the table is written, the figure is not "
            "(Debian: apt-get install python3-matplotlib)" % sys.executable)
    names = [r["variant"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows):
        accs = [100 * a for a in r["accs"] if a is not None]
        colour = "#c0392b" if r["variant"] == "reference" else \
            "#2471a3" if r["variant"] == "corrected" else "#7f8c8d"
        if accs:
            ax.plot([min(accs), max(accs)], [yi, yi], color=colour, lw=1.5)
            ax.scatter(accs, [yi] * len(accs), color=colour, s=14, zorder=3)
            ax.scatter([sum(accs) / len(accs)], [yi], color=colour, marker="|", s=220, zorder=4)
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_xlabel("test accuracy (%): each seed, its range and mean (|)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


ACC_SUFFIXES = ("_float32", "_exact", "_int")


def accum_of(rec):
    """(label, bits, rule) of a trace header's accumulator: float32 (the default), exact,
    int(A, wrap|saturate[, FL[, floor|nearest]]) or anything else as written."""
    a = ((rec.get("config") or {}).get("arithmetic") or {}).get("accumulator") or "float32"
    a = " ".join(a.split())
    if a.startswith("int(") and a.endswith(")"):
        parts = [w.strip() for w in a[4:-1].split(",")]
        try:
            bits = int(parts[0])
        except ValueError:
            return a, None, None
        rule = parts[1] if len(parts) > 1 and parts[1] else "wrap"
        if len(parts) > 2 and parts[2]:
            rule += ", F=" + parts[2]
        if len(parts) > 3 and parts[3] and parts[3] != "floor":
            rule += ", " + parts[3]
        return a, bits, rule
    return a, None, None


def accum_run(path):
    """header facts, test accuracy and forward-GEMM overflows per step of one trace"""
    head, acc, steps, ov = None, None, 0, [0, 0, 0]
    for rec in trace_records(path):
        t = rec.get("type")
        if t == "header":
            head = rec
        elif t == "test":
            acc = rec.get("test_acc")
        elif t == "step":
            steps += 1
            for u in rec.get("units", []):
                o = (u.get("acc") or {}).get("overflows")
                if isinstance(o, list):
                    for g in range(min(3, len(o))):
                        ov[g] += o[g] or 0
    if head is None:
        die("%s: no header record" % path)
    name = ((head.get("config") or {}).get("run") or {}).get("name") or run_name(path)
    group = name
    for suf in ACC_SUFFIXES:
        i = name.rfind(suf)
        if i > 0:
            group = name[:i]
            break
    label, bits, rule = accum_of(head)
    return {"group": group, "acc_label": label, "bits": bits, "rule": rule,
            "seed": head.get("seed"), "test_acc": acc, "steps": steps,
            "build": build_of(head),
            "ov_per_step": [o / steps if steps else None for o in ov], "path": path}


def accum_merged(path):
    """the runs of an earlier accum.json (its rows: group, accumulator, bits, rule, seeds and
    accs; the forward overflows per step of each seed, or where an older file has only their
    mean, the mean for each seed, which leaves every mean over seeds as it was)"""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        die("%s: not a readable accum.json (%s)" % (path, e))
    rows = j.get("rows") if isinstance(j, dict) else None
    if not isinstance(rows, list):
        die("%s: no \"rows\" list (expected the accum.json of `report.py accum`)" % path)
    runs = []
    for i, t in enumerate(rows):
        where = "%s: rows[%d]" % (path, i)
        if not isinstance(t, dict):
            die("%s: expected an object" % where)
        for k in ("group", "accumulator"):
            if not isinstance(t.get(k), str) or not t.get(k):
                die("%s: \"%s\" missing or not a string" % (where, k))
        seeds, accs = t.get("seeds"), t.get("accs")
        if not isinstance(seeds, list) or not isinstance(accs, list) or len(seeds) != len(accs):
            die("%s: \"seeds\" and \"accs\" must be lists of one length" % where)
        ovs = t.get("fwd_ov_per_seed")
        if not isinstance(ovs, list) or len(ovs) != len(seeds):
            ovs = [t.get("fwd_ov_per_step")] * len(seeds)
        bls = t.get("builds")
        if not isinstance(bls, list) or len(bls) != len(seeds):
            bls = [None] * len(seeds)
        bls = [build_tuple(b) for b in bls]
        for seed, acc, ov, bl in zip(seeds, accs, ovs, bls):
            if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not 0 <= acc <= 1:
                die("%s: test accuracy %r of seed %r is not a fraction in [0, 1]" %
                    (where, acc, seed))
            runs.append({"group": t["group"], "acc_label": t["accumulator"],
                         "bits": t.get("bits"), "rule": t.get("rule"), "seed": seed,
                         "test_acc": acc, "steps": None, "ov_per_step": [ov, None, None],
                         "build": bl,
                         "path": path, "name": "%s (%s)" % (t["group"], t["accumulator"])})
    return runs


def cmd_accum(args):
    if not args.dirs and not args.merge:
        die("accum: no runs to read: give folders of runs (DIR) or --merge accum.json")
    traces = find_traces(args.dirs) if args.dirs else []
    if not traces and not args.merge:
        die("no traces under %s" % ", ".join(args.dirs))
    runs = []
    for t in traces:
        r = accum_run(t)
        if r["test_acc"] is None:  # a run still training, or stopped before its test
            print(PROG + ": %s: no test record yet, left out" % t, file=sys.stderr)
        else:
            runs.append(r)
    seen = {(r["group"], r["acc_label"], r["seed"]): r["path"] for r in runs}
    drops = {}  # --drop GROUP or GROUP@SEED: (group, seed or None) -> merged runs left out
    for d in args.drop or []:
        g, at, sd = d.partition("@")
        try:
            key = (g, int(sd) if at else None)
        except ValueError:
            die("--drop %s: expected GROUP or GROUP@SEED (a whole number)" % d)
        if not g:
            die("--drop %s: no group named (expected GROUP or GROUP@SEED)" % d)
        drops[key] = 0
    for m in args.merge or []:
        for r in accum_merged(m):
            key = (r["group"], r["acc_label"], r["seed"])
            hit = [k for k in ((r["group"], None), (r["group"], r["seed"])) if k in drops]
            for k in hit:
                drops[k] += 1
            if hit:
                continue
            if key in seen:
                die("%s, seed %s of %s: also in %s; each seed of a run once" %
                    (m, r["seed"], " ".join(map(str, key[:2])), seen[key]))
            seen[key] = m
            runs.append(r)
    for (g, sd), n in drops.items():
        if not n:
            die("--drop %s%s: no such runs in %s" % (g, "" if sd is None else "@%d" % sd,
                                                     ", ".join(args.merge or ["(no --merge)"])))
    if not runs:
        die("no finished runs (with a test record) in %s" %
            ", ".join(list(args.dirs) + ["--merge " + m for m in args.merge or []]))
    groups = []
    for r in runs:
        if r["group"] not in groups:
            groups.append(r["group"])

    def order(label, bits, rule):
        return (0, 0, "") if label == "float32" else (1, 0, "") if label == "exact" else \
            (2, bits or 0, rule or "") if bits else (3, 0, label)

    table = []
    for g in groups:
        cells = {}
        for r in runs:
            if r["group"] == g:
                cells.setdefault((r["acc_label"], r["bits"], r["rule"]), []).append(r)
        for key in sorted(cells, key=lambda k: order(*k)):
            rs = sorted(cells[key], key=lambda r: r["seed"] if r["seed"] is not None else -1)
            accs = [r["test_acc"] for r in rs if r["test_acc"] is not None]
            table.append({"group": g, "accumulator": key[0], "bits": key[1], "rule": key[2],
                          "seeds": [r["seed"] for r in rs], "accs": [r["test_acc"] for r in rs],
                          "acc_mean": mean(accs), "acc_min": min(accs) if accs else None,
                          "acc_max": max(accs) if accs else None,
                          "fwd_ov_per_step": mean([r["ov_per_step"][0] for r in rs]),
                          "fwd_ov_per_seed": [r["ov_per_step"][0] for r in rs],
                          "builds": [dict(zip(BUILD_KEYS, r["build"])) if r["build"] else None
                                     for r in rs]})
    narrowest = []
    for g in groups:
        ex = [t for t in table if t["group"] == g and t["accumulator"] == "exact"]
        if not ex or ex[0]["acc_mean"] is None:
            continue
        ref = ex[0]["acc_mean"]
        rules = []
        for t in table:
            if t["group"] == g and t["rule"] and t["rule"] not in rules:
                rules.append(t["rule"])
        for rule in sorted(rules):
            regs = sorted([t for t in table if t["group"] == g and t["rule"] == rule and
                           t["acc_mean"] is not None], key=lambda t: t["bits"])
            best = None
            for t in reversed(regs):  # from the widest down, while every one is within
                if 100 * (ref - t["acc_mean"]) > args.within:
                    break
                best = t["bits"]
            narrowest.append({"group": g, "rule": rule, "bits": best, "exact": ref,
                              "widths": [t["bits"] for t in regs]})
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "accum.json"), "w") as f:
        json.dump({"within_points": args.within, "rows": table, "narrowest": narrowest,
                   "runs": [{"name": r.get("name") or
                             os.path.basename(os.path.dirname(r["path"])),
                             "seed": r["seed"], "accumulator": r["acc_label"]}
                            for r in runs]},
                  f, indent=1)
    pct = lambda x: fmt(None if x is None else 100 * x, "%.2f")
    letter, mlines = machines([build_tuple(b) for t in table for b in t["builds"]])
    several = len(letter) > 1
    lines = ["| runs | accumulator | test acc % mean | min - max | per seed (seeds) | "
             "forward overflows per step |" + (" machine per seed |" if several else ""),
             "|---|---|---:|---:|---|---:|" + ("---|" if several else "")]
    for t in table:
        lines.append("| %s | %s | %s | %s - %s | %s (%s) | %s |" % (
            md(t["group"]), md(t["accumulator"]), pct(t["acc_mean"]), pct(t["acc_min"]),
            pct(t["acc_max"]), " / ".join(pct(a) for a in t["accs"]),
            ",".join(str(x) for x in t["seeds"]), fmt(t["fwd_ov_per_step"], "%.1f")) +
            (" %s |" % " / ".join(letter[build_tuple(b)] for b in t["builds"])
             if several else ""))
    lines += [""] + mlines[:-1]
    lines += ["", "Narrowest register whose mean test accuracy, and that of every wider register "
              "run, is within %g points of `exact`:" % args.within, "",
              "| runs | overflow | exact % | narrowest within | widths run |",
              "|---|---|---:|---:|---|"]
    for n in narrowest:
        lines.append("| %s | %s | %s | %s | %s |" % (
            md(n["group"]), n["rule"], pct(n["exact"]),
            "int(%d)" % n["bits"] if n["bits"] else "none",
            ", ".join(str(b) for b in n["widths"])))
    with open(os.path.join(out, "accum.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    accum_figure(table, groups, os.path.join(out, "accum.png"), args.title)
    print(PROG + ": %s/accum.md, accum.json, accum.png" % out)


def accum_figure(table, groups, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not importable by %s: the table is written, the figure is not "
            "(Debian: apt-get install python3-matplotlib)" % sys.executable)
    fig, axes = plt.subplots(1, len(groups), figsize=(4.6 * len(groups), 4.4), squeeze=False,
                             sharey=True)
    styles = {"wrap": ("#c0392b", "o", "--"), "saturate": ("#2471a3", "s", "-")}
    extra = [("#8e44ad", "^", "-."), ("#d35400", "v", ":"), ("#16a085", "D", "-"),
             ("#2c3e50", "P", "--"), ("#b7950b", "X", "-."), ("#e84393", "*", ":")]
    for t in table:
        if t["rule"] and t["rule"] not in styles:
            styles[t["rule"]] = extra[(len(styles) - 2) % len(extra)]
    for ax, g in zip(axes[0], groups):
        rows = [t for t in table if t["group"] == g]
        widths = sorted({t["bits"] for t in rows if t["bits"]})
        for label, colour in (("float32", "#7f8c8d"), ("exact", "#27ae60")):
            for t in rows:
                if t["accumulator"] == label and t["acc_mean"] is not None:
                    ax.axhline(100 * t["acc_mean"], color=colour, lw=1, ls=":",
                               label="%s %.2f" % (label, 100 * t["acc_mean"]))
        for rule, (colour, marker, ls) in styles.items():
            pts = [t for t in rows if t["rule"] == rule and t["acc_mean"] is not None]
            pts.sort(key=lambda t: t["bits"])
            if not pts:
                continue
            x = [t["bits"] for t in pts]
            y = [100 * t["acc_mean"] for t in pts]
            # (a mean of equal values may round a hair past them)
            lo = [max(0.0, 100 * (t["acc_mean"] - t["acc_min"])) for t in pts]
            hi = [max(0.0, 100 * (t["acc_max"] - t["acc_mean"])) for t in pts]
            ax.errorbar(x, y, yerr=[lo, hi], color=colour, marker=marker, ls=ls, ms=5,
                        capsize=3, label="int(A, %s)" % rule)
        ax.set_xticks(widths)
        ax.set_xlabel("accumulator register A (bits)")
        ax.set_title(g, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
                  frameon=False)  # below the axes: the data use all of them
    axes[0][0].set_ylabel("test accuracy (%): mean, seed range")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin", default=ROOT,
                    help="directory of adapt-train, adapt-perf, adapt-heatmap")
    ap.add_argument("--version", action="store_true",
                    help="print the version of adapt-sim whose programs it runs, and exit")
    sub = ap.add_subparsers(dest="cmd")

    def build_opts(p):
        p.add_argument("--baseline", help="float32 trace for SU2 (default: the first fp32 run)")
        p.add_argument("--hw", help="timing table for hardware-calibrated columns")
        p.add_argument("--title", help="report title")
        p.add_argument("--notes", metavar="FILE",
                       help="Markdown to print under 'Reading the numbers', after the "
                            "comparison tables (what a reader should take from them)")

    def set_opt(p):
        p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                       help="added to every run's command after the run list's own --set "
                            "(e.g. train.epochs=2 for a trial of the whole list); repeatable")

    p = sub.add_parser("run")
    p.add_argument("runlist")
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="run.threads of each run (0: default)")
    set_opt(p)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("build")
    p.add_argument("traces", nargs="+")
    p.add_argument("--out", required=True)
    build_opts(p)
    p.set_defaults(fn=cmd_build)
    p = sub.add_parser("all")
    p.add_argument("runlist")
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    set_opt(p)
    build_opts(p)
    p.set_defaults(fn=cmd_all)
    p = sub.add_parser("ablation")
    p.add_argument("config")
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--switches", help="the switches to turn off (or on) one at a time: keys "
                                      "of [reference], and ste, round_logits and lb_update "
                                      "(the [quantization] settings whose auto value "
                                      "quantization.compat decides; default: all of them)")
    p.add_argument("--each", choices=("off", "on"), default="off",
                   help="off: each switch off alone from the reference (default); on: each "
                        "switch on alone from the corrected mode")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--table-only", action="store_true",
                   help="build the table and figure from the runs already in --out")
    p.add_argument("--merge", action="append", metavar="JSON",
                   help="add the seeds of an earlier ablation.json of the same configuration, "
                        "settings and switches (its run folders need not exist any more); "
                        "repeatable")
    set_opt(p)
    p.set_defaults(fn=cmd_ablation)
    p = sub.add_parser("accum")
    p.add_argument("dirs", nargs="*", metavar="DIR")
    p.add_argument("--merge", action="append", metavar="JSON",
                   help="also the runs of an earlier accum.json (repeatable)")
    p.add_argument("--drop", action="append", metavar="GROUP[@SEED]",
                   help="leave out the merged runs of a group (or of one seed of it), to take "
                        "them from run folders instead, e.g. runs of another machine "
                        "(repeatable)")
    p.add_argument("--out", required=True)
    p.add_argument("--within", type=float, default=0.5,
                   help="points of test accuracy from exact (default 0.5)")
    p.add_argument("--title", help="the figure's title")
    p.set_defaults(fn=cmd_accum)
    p = sub.add_parser("slurm")
    p.add_argument("runlist")
    p.add_argument("--out", required=True)
    p.add_argument("--partition")
    p.add_argument("--time", default="04:00:00")
    p.add_argument("--cpus", type=int, default=4)
    p.add_argument("--max-parallel", type=int, default=0)
    set_opt(p)
    p.set_defaults(fn=cmd_slurm)
    args = ap.parse_args()
    if args.version:
        print_version(args)
        return
    if not args.cmd:
        ap.error("a subcommand is required (run, build, all, ablation, accum or slurm)")
    for kv in getattr(args, "set", None) or []:
        if "=" not in kv or "." not in kv.split("=", 1)[0]:
            die("--set expects SECTION.KEY=VALUE, got '%s'" % kv)
    if getattr(args, "jobs", 1) < 1:
        die("--jobs must be at least 1")
    args.bin = os.path.abspath(args.bin)
    args.fn(args)


if __name__ == "__main__":
    main()
