"""Seeded random walks over a spec: from an initial state, each step takes one enabled action
instance, every enabled instance equally likely; the walk is a trace in the usual format
(checker/trace.py), so `kcheck replay` and `kcheck conform` re-run it.

`kcheck walk SPEC --steps N --seed S` prints it and saves it with -o. A step that would leave
the explicit search's epoch caps is not taken (its instance counts as disabled there); a walk
that reaches a state with no enabled instance stops early."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from kcheck.layout import initial_words, layout_of
from kcheck.trace import Executor, build, to_json


def random_walk(model, steps: int, seed: int, start=None, executor: Executor | None = None,
                allow=None) -> dict:
    """The trace document of one walk. `start(state) -> bool` restricts the initial states
    (shown values, declared names), e.g. to those a conformance adapter can reach;
    `allow(state, instance) -> bool` the action instances a step may take (state: shown values,
    flat field names), e.g. to those a conformance adapter can drive from that state."""
    rng = random.Random(seed)
    ex = executor or Executor(model)
    lay = layout_of(model)
    initials = [w for w in initial_words(model)
                if start is None or start(lay.show(lay.unpack_flat(w)))]
    if not initials:
        raise ValueError(f"no initial state of {model.spec.name}/{model.variant} is allowed")
    words = rng.choice(initials)
    initial, taken = words, []
    for _ in range(steps):
        S = np.array(words, dtype=np.uint64).reshape(-1, 1)
        enabled = [k for k, g in enumerate(ex.comp.guards(S))
                   if bool(g if isinstance(g, (bool, np.bool_)) else np.broadcast_to(g, (1,))[0])]
        if allow is not None:
            flat = dict(zip((f.name for f in lay.fields),
                            (f.type.show(v) for f, v in zip(lay.fields, lay.unpack_flat(words)))))
            enabled = [k for k in enabled if allow(flat, model.instances[k])]
        rng.shuffle(enabled)
        for k in enabled:
            nxt, _, inside = ex.apply(words, k)
            if inside:
                break
        else:
            break
        taken.append(k)
        words = nxt
    doc = to_json(build(model, None, None, initial, taken, ex))
    doc["description"] = (f"kcheck walk {model.spec.name} --variant {model.variant} "
                          f"--steps {steps} --seed {seed}")
    return doc


def register(sub) -> dict:
    from kcheck.options import json_option, model_options, positive
    w = sub.add_parser("walk", help="a seeded random walk over a spec, saved as a trace",
                       parents=model_options() + [json_option("print the walk as a trace file "
                                                              "(JSON) instead of a table")])
    w.add_argument("--steps", type=positive("--steps"), default=20)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("-o", "--output", metavar="FILE", help="save the trace here (JSON)")
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
