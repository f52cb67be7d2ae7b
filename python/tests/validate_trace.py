#!/usr/bin/python3
"""Validates adapt-sim traces against doc/trace.schema.json (needs python3-jsonschema).

    python/tests/validate_trace.py [--schema doc/trace.schema.json] TRACE|RUN_DIR...

Each line is checked against the schema; then the whole file is read with
adaptsim.read_trace, which checks what a per-line schema cannot (the header
first and once, nothing after the end record, as many units in each step as
in the header). Prints one message per problem, as FILE:LINE: ..., and exits
1 when there was any.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRCDIR, "python"))

import adaptsim  # noqa: E402

SCHEMA = os.path.join(SRCDIR, "doc", "trace.schema.json")


def load_validator(schema_path=SCHEMA):
    import jsonschema
    with open(schema_path) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def record_errors(validator, record):
    """Messages for one record, deepest first: 'at units/0/wl: ...'."""
    out = []
    for e in sorted(validator.iter_errors(record), key=lambda e: -len(e.absolute_path)):
        where = "/".join(str(p) for p in e.absolute_path)
        out.append("%s%s" % ("at %s: " % where if where else "", e.message))
    return out


def validate_file(validator, path, max_errors=20, step_every=1):
    """Problems of one trace as 'path:line: message' strings (empty when valid).

    step_every > 1 checks only every step_every-th step record and those with
    events (all other records always): long traces are mostly alike steps.
    """
    if os.path.isdir(path):
        path = os.path.join(path, "trace.jsonl")
    problems = []
    n_steps = 0
    try:
        for line, rec in adaptsim.iter_records(path):
            if rec.get("type") == "step":
                n_steps += 1
                if (n_steps - 1) % step_every and not rec.get("events"):
                    continue
            for msg in record_errors(validator, rec):
                problems.append("%s:%d: %s record: %s" % (path, line, rec.get("type"), msg))
                if len(problems) >= max_errors:
                    return problems
        adaptsim.read_trace(path)
    except (adaptsim.TraceError, OSError) as e:
        problems.append(str(e))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schema", default=SCHEMA)
    ap.add_argument("--step-every", type=int, default=1, metavar="N",
                    help="check every N-th step record and those with events (default 1: all)")
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    v = load_validator(a.schema)
    bad = 0
    for p in a.traces:
        problems = validate_file(v, p, step_every=a.step_every)
        for msg in problems:
            print(msg)
        bad += bool(problems)
        if not problems:
            print("%s: valid" % p)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
