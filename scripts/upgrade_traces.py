"""Rewrites trace files that name a spec's state fields as they were before the spec used
two-dimensional arrays and records (issue 12; consumer_group's rewrite, spec/consumer_group_notes.md,
"Two-dimensional arrays and a record for a commit").

    python scripts/upgrade_traces.py FILE_OR_FOLDER...            # rewrite in place
    python scripts/upgrade_traces.py --check FILE_OR_FOLDER...    # only say what would change

A spec rewritten with them keeps its storage order (docs/writing-specs.md), so every field of the
new state was a field of the old one, under a name this script derives from the spec as it is now:

- element [m][q] of a two-dimensional array ``holds`` was ``holds[k]``, k its row-major position
  (m * partitions + q), and the initial state gave the array as one flat list;
- member ``request`` of element c of an array of records ``commit`` was ``commit_request[c]``, one
  of the parallel arrays the record replaces (``commit_request``, ``commit_member``, ...).

The steps, arguments, outcomes and format version stay as they are: only field names and the
initial state's shapes change. Each rewritten trace is replayed through the current spec before
it is written (a file that does not replay afterwards is left alone and reported, exit 1), and a
counterexample's Markdown twin (checker/render.py) is written again from the replay. Files whose
names are already current are not touched. Exit codes: 0 done, 1 some file did not replay,
2 bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kcheck.loader import load_spec
from kcheck.render import markdown
from kcheck.trace import TraceError, load, replay, spec_path

ROOT = Path(__file__).resolve().parent.parent
from kcheck.spec.lang import FieldInfo, SpecError  # noqa: E402


def former_names(fields) -> dict[str, FieldInfo]:
    """Each flat field of a two-dimensional array or an array of records, by its former name."""
    out: dict[str, FieldInfo] = {}
    for base, flat in fields.arrays.items():
        for f in flat:
            path = f.path
            if len(path) > 1 and all(isinstance(x, int) for x in path):
                out[f"{base}[{f.element}]"] = f              # holds[m][q] was holds[m*P+q]
            elif len(path) == 2 and isinstance(path[0], int) and isinstance(path[1], str):
                out[f"{base}_{path[1]}[{path[0]}]"] = f       # commit[c].request was commit_request[c]
    return out


def _fill(node, values: dict, partial: bool = False):
    """The nested value of a compound field (lists, dicts) from its flat fields' values, _MISSING
    when one is missing; with ``partial`` a record may leave members out (an expected state may)."""
    if isinstance(node, FieldInfo):
        return values.get(node.index, _MISSING)
    if isinstance(node, list):
        out = [_fill(n, values, partial) for n in node]
        return _MISSING if any(x is _MISSING for x in out) else out
    out = {k: _fill(n, values, partial) for k, n in node.items()}
    if partial:
        out = {k: x for k, x in out.items() if x is not _MISSING}
        return out or _MISSING
    return _MISSING if any(x is _MISSING for x in out.values()) else out


_MISSING = object()


def _current(fields, name: str, value) -> bool:
    """Whether ``name: value`` is already in the spec's current names and shapes."""
    return name in fields.scalars or any(f.name == name for f in fields.fields) or \
        fields.leaves(name, value) is not None


def upgrade(model, doc: dict) -> tuple[dict, list[str]]:
    """-> (the document in the spec's current names, the renames made)."""
    fields = model.fields
    former = former_names(fields)
    if not former:
        return doc, []
    renamed: list[str] = []

    def rename_expected(expected: dict) -> dict:
        """An expected state: a flat name is renamed; a declared name with a whole flat list
        becomes the whole current field (nested lists; records with the members given)."""
        out: dict = {}
        whole: dict[str, dict] = {}          # base -> {flat index: value}, placed at first sight
        for name, value in expected.items():
            if name in former:
                out[former[name].name] = value
                renamed.append(f"{name} -> {former[name].name}")
            elif _current(fields, name, value) or not isinstance(value, list) or f"{name}[0]" not in former:
                out[name] = value
            else:
                base = former[f"{name}[0]"].base
                for i, x in enumerate(value):
                    f = former.get(f"{name}[{i}]")
                    if f is None:
                        raise TraceError(f"{name}[{i}] is not a former field of {model.spec.name}")
                    whole.setdefault(base, {})[f.index] = x
                out.setdefault(base, _MISSING)
                renamed.append(f"{name}[...] -> {base}")
        for base, flat in whole.items():
            value = _fill(fields.compound[base], flat, partial=True)
            if value is _MISSING:
                raise TraceError(f"expected '{base}': the former fields given do not make it whole")
            out[base] = value
        return out

    new = dict(doc)
    state = doc.get("state")
    if isinstance(state, dict) and state:
        kept, flat = {}, {}
        for name, value in state.items():
            if _current(fields, name, value) or not isinstance(value, list) or f"{name}[0]" not in former:
                kept[name] = value
                continue
            for i, x in enumerate(value):
                f = former.get(f"{name}[{i}]")
                if f is None:
                    raise TraceError(f"initial state: {name}[{i}] is not a former field of "
                                     f"{model.spec.name}")
                flat[f.index] = x
            renamed.append(f"state.{name} -> {former[f'{name}[0]'].base}")
        rebuilt = {}
        for base in fields.compound:
            if base in kept or not any(f.index in flat for f in fields.arrays[base]):
                continue
            value = _fill(fields.compound[base], flat)
            if value is _MISSING:
                raise TraceError(f"initial state: the former fields of '{base}' are not all given")
            rebuilt[base] = value
        ordered = {}
        for base in fields.declared:          # the spec's order, as a saved trace has it
            if base in kept:
                ordered[base] = kept.pop(base)
            elif base in rebuilt:
                ordered[base] = rebuilt[base]
        ordered.update(kept)                  # names the spec does not know: replay reports them
        new["state"] = ordered
    steps = []
    for st in doc.get("steps", []):
        exp = st.get("expect")
        if isinstance(exp, dict) and isinstance(exp.get("state"), dict):
            st = {**st, "expect": {**exp, "state": rename_expected(exp["state"])}}
        steps.append(st)
    new["steps"] = steps
    return new, renamed


def _files(args) -> list[Path]:
    out = []
    for a in args:
        p = Path(a)
        if p.is_dir():
            out += sorted(p.rglob("*.json"))
        elif p.is_file():
            out.append(p)
        else:
            raise SystemExit(f"upgrade_traces: {a} is neither a trace file nor a folder of them")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="trace files or folders of them (*.json)")
    ap.add_argument("--check", action="store_true", help="only report what would change")
    args = ap.parse_args(argv)
    try:
        files = _files(args.paths)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    failed = 0
    for path in files:
        try:
            doc = load(path)
            spec = load_spec(spec_path(doc["spec"], path))
            model = spec.instantiate(doc.get("variant"), doc.get("params", {}))
            new, renamed = upgrade(model, doc)
        except (TraceError, SpecError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            failed += 1
            continue
        if not renamed:
            continue
        r = replay(model, new)
        if not r.ok:
            print(f"{path}: does not replay after the renames: {r.message}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path}: {len(renamed)} renamed" + (" (not written: --check)" if args.check else ""))
        if args.check:
            continue
        path.write_text(json.dumps(new, indent=2) + "\n")
        twin = path.with_suffix(".md")
        if twin.exists() and r.trace is not None and new.get("property"):
            twin.write_text(markdown(r.trace, new))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
