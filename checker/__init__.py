"""kcheck engines, traces, rendering and the command line."""
import os

# numpy's OpenBLAS starts a thread for every other core when numpy is imported, and the thread
# spins for a while waiting for work that kcheck never gives it (no linear algebra here): 0.80
# against 0.69 CPU seconds for `kcheck check two_phase`, mean of 8 alternated runs each, the
# wall time the same, since the spinning takes the other core (which a Spark executor, a test
# worker or the broker wanted). Set before numpy is imported; a value the user set stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
