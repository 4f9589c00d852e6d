"""The breadth-first search's state at a level boundary, written to a directory and read back, so
that a killed run of a long search (two_phase N=11 takes a quarter of an hour) resumes from its
last finished level instead of from the start.

A checkpoint is one file, ``DIR/checkpoint.npz``, replaced atomically (written beside it, then
renamed), so a kill during a write leaves the previous one whole. It holds what checker/bfs.py
keeps between levels: the visited set, the frontier, every level's parent links and action
instances (traces are rebuilt from them), the counters and the counterexamples found so far, and
an identity: the spec, variant, parameters, properties, deadlock checking and a digest of the
compiled code. A checkpoint of another search is refused in one line naming what differs.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import numpy as np

from kcheck.verdict import Counterexample

FILE = "checkpoint.npz"
FORMAT = 2    # 2: each level's parent links and action instances as they are kept (no copy to join)


def identity(model, props: list[str], deadlock: bool, comp, initial) -> dict:
    """What a checkpoint must match to be resumed: a search of the same states and rules."""
    return {"format": FORMAT, "spec": model.spec.name, "variant": model.variant,
            "params": {k: int(v) if isinstance(v, (bool, int)) else str(v)
                       for k, v in model.params.as_dict().items()},
            "properties": list(props), "deadlock": bool(deadlock),
            "initial": "the spec's" if initial is None else
                       hashlib.sha256(repr(list(initial)).encode()).hexdigest()[:16],
            "code": hashlib.sha256(comp.source.encode()).hexdigest()[:16]}


def _describe(ident: dict) -> str:
    params = ", ".join(f"{k}={v}" for k, v in ident.get("params", {}).items())
    return f"{ident.get('spec')}/{ident.get('variant')}" + (f" ({params})" if params else "")


_WHAT = {"spec": "spec", "variant": "variant", "params": "parameters", "properties": "properties",
         "deadlock": "deadlock checking", "initial": "initial states",
         "code": "compiled code (the spec, or kcheck's packing of its states, changed)",
         "format": "checkpoint format"}


@dataclass
class Saved:
    depth: int
    fp: np.ndarray
    keys: np.ndarray | None
    frontier: np.ndarray
    parents: list
    actions: list
    initial_words: list
    transitions: int
    cut_by_bounds: int
    cut_only_states: int
    fired: list
    found: dict
    elapsed_s: float


def save(directory: str, ident: dict, visited, frontier, parents, actions, initial_words, res,
         elapsed_s: float) -> str:
    """Write the search's state after a finished level; returns the file's path."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise SaveError(f"cannot create the checkpoint folder {directory} ({e.strerror})") from None
    meta = {"identity": ident, "depth": res.depth, "transitions": res.transitions,
            "cut_by_bounds": res.cut_by_bounds, "cut_only_states": res.cut_only_states,
            "fired": list(res.fired), "elapsed_s": elapsed_s,
            "initial_words": [list(map(str, w)) for w in initial_words],
            "found": {n: {"kind": f.kind, "initial": [str(x) for x in f.initial],
                          "steps": list(map(int, f.steps))} for n, f in res.found.items()},
            "level_sizes": [len(p) for p in parents]}
    # the arrays as the search keeps them, so that writing costs no copy of them (two_phase N=11:
    # joining the levels' links would hold 3 GB more while writing)
    arrays = {"meta": np.array(json.dumps(meta)), "fp": visited.sorted_fp, "frontier": frontier}
    for d, (p, a) in enumerate(zip(parents, actions)):
        arrays[f"parents_{d}"], arrays[f"actions_{d}"] = p, a
    if visited.keys is not None:
        arrays["keys"] = visited.keys[:, :visited.n]
    path = os.path.join(directory, FILE)
    tmp = path + f".{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        # a full or read-only disk: the previous checkpoint stays whole and no half file is left
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise SaveError(f"cannot write the checkpoint {path} ({e.strerror})") from None
    return path


class SaveError(Exception):
    """A checkpoint that could not be written: the search stops there, with what it found."""


def load(directory: str, ident: dict) -> Saved | None:
    """The saved state in ``directory``, None when there is none yet; CheckpointError when it is
    another search's or unreadable."""
    path = os.path.join(directory, FILE)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CheckpointError(f"--checkpoint {directory}: not a directory")
    if not os.path.exists(path):
        return None
    def unreadable(e):
        return CheckpointError(f"--checkpoint {directory}: {FILE} cannot be read "
                               f"({type(e).__name__}: {e}); remove it or give another directory")
    try:
        z = np.load(path, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
    except Exception as e:  # a damaged or foreign file: say so in one line
        raise unreadable(e) from None
    with z:
        theirs = meta.get("identity", {})
        for key in ("format", "spec", "variant", "params", "properties", "deadlock", "initial",
                    "code"):
            if theirs.get(key) != ident[key]:   # refused before the arrays are read
                raise CheckpointError(
                    f"--checkpoint {directory} holds a search of {_describe(theirs)} that differs "
                    f"in its {_WHAT[key]} ({theirs.get(key)} there, {ident[key]} here): give "
                    f"another directory or remove {FILE}")
        try:
            arrays = {k: z[k] for k in z.files if k != "meta"}
            levels = range(len(meta["level_sizes"]))
            parents = [arrays[f"parents_{d}"] for d in levels]
            actions = [arrays[f"actions_{d}"] for d in levels]
        except Exception as e:
            raise unreadable(e) from None
    found = {n: Counterexample(n, f["kind"], tuple(int(x) for x in f["initial"]), f["steps"])
             for n, f in meta["found"].items()}
    return Saved(depth=meta["depth"], fp=arrays["fp"], keys=arrays.get("keys"),
                 frontier=arrays["frontier"], parents=parents, actions=actions,
                 initial_words=[tuple(int(x) for x in w) for w in meta["initial_words"]],
                 transitions=meta["transitions"], cut_by_bounds=meta["cut_by_bounds"],
                 cut_only_states=meta["cut_only_states"], fired=meta["fired"], found=found,
                 elapsed_s=meta["elapsed_s"])


class CheckpointError(Exception):
    """A checkpoint directory that holds another search's state, or one that cannot be read."""
