"""kcheck engines, traces, rendering and the command line."""
import os

# numpy's OpenBLAS starts a thread for every other core when numpy is imported, and the thread
# spins for a while waiting for work that kcheck never gives it (no linear algebra here): 0.80
# against 0.69 CPU seconds for `kcheck check two_phase`, mean of 8 alternated runs each, the
# wall time the same, since the spinning takes the other core (which a Spark executor, a test
# worker or the broker wanted). Set before numpy is imported; a value the user set stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def cache_dir(name: str):
    """kcheck's cache of ``name`` outside the repository: ~/.cache/kcheck/NAME, or under
    $XDG_CACHE_HOME (Kafka's artifacts, Spark's class archive)."""
    from pathlib import Path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "kcheck" / name


# The spec language, the one import path for a spec: `from kcheck import Spec, Int, ...`. The
# names are looked up on first use (PEP 562), so importing kcheck (its pytest plugin, loaded into
# every pytest run of a user who has kcheck installed) loads nothing but this file.
__all__ = ["Spec", "SpecError", "Epoch", "Int", "Bool", "Enum", "Array", "Record", "If", "Case", "And", "Or",
           "Not", "Implies", "Min", "Max", "Sum", "Count", "Exists", "Forall", "TRUE", "FALSE", "const",
           "Expr", "cache_dir"]


def __getattr__(name: str):
    if name in __all__:
        from kcheck.spec import lang
        return getattr(lang, name)
    raise AttributeError(f"module 'kcheck' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
