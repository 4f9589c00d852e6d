"""Seeded random walks over a spec: from an initial state, each step picks an action type with an
enabled instance, every type equally likely, then one of its enabled instances (trace.random_walk
says why); the walk is a trace in the usual format
(checker/trace.py), so `kcheck replay` and `kcheck conform` re-run it.

`kcheck walk SPEC --steps N --seed S` prints it and saves it with -o. A step that would leave
the explicit search's epoch caps is not taken (its instance counts as disabled there); a walk
that reaches a state with no enabled instance stops early."""
from __future__ import annotations

import json
from pathlib import Path

from kcheck.trace import random_walk


def register(sub) -> dict:
    from kcheck.options import json_option, model_options, path_value, positive
    w = sub.add_parser("walk", help="a seeded random walk over a spec, saved as a trace",
                       parents=model_options() + [json_option("print the walk as a trace file "
                                                              "(JSON) instead of a table")])
    w.add_argument("--steps", type=positive("--steps"), default=20,
                   help="steps of the walk (default 20; it stops early where nothing is enabled)")
    w.add_argument("--seed", type=int, default=0,
                   help="the random seed (default 0): the same seed gives the same walk")
    w.add_argument("-o", "--output", metavar="FILE", type=path_value("-o"), help="save the trace here (JSON)")
    return {"walk": cmd_walk}


def cmd_walk(args, console) -> int:
    from kcheck.options import OK, BadInput, params
    from kcheck.loader import load_spec
    from kcheck.render import trace_table
    from kcheck.trace import load, replay
    model = load_spec(args.spec).instantiate(args.variant, params(args.param))
    doc = random_walk(model, args.steps, args.seed)
    if args.output:
        try:
            Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
        except OSError as e:
            raise BadInput(f"cannot write {args.output}: {e.strerror}") from None
        doc = load(args.output)
    r = replay(model, doc)
    if args.json:
        from kcheck.verdict import print_json
        print_json(doc, "walk")
        return OK
    console.print(trace_table(r.trace, f"{model.spec.name}/{model.variant}: walk of "
                                       f"{len(doc['steps'])} steps, seed {args.seed}"))
    if args.output:
        console.print(f"saved to {args.output}", markup=False)
    return OK
