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
