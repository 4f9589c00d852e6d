"""The explicit engine's loops that numpy cannot do in one pass, compiled: checker/native.c,
built with the package (``pip install``, which scripts/setup.sh runs) and called through ctypes.
The visited set's membership test and merge, the packing and reading of sort keys, the merge of
a level's sorted parts, the steps of action instances whose writes are all constants, and, for
states of one word, a block's first occurrences gathered and a level's runs collapsed (least
(action instance, run), visited test, merge into the level so far) each in the pass that reads
its sort (``first_gather``, ``collapse``).

numpy has no merge of two sorted arrays, nor a search that walks forward through sorted
queries: a level's membership test was one binary search a state (each a handful of cache
misses in a set of hundreds of megabytes), its merge into the set a scatter of the whole set
computed with bincount and cumsum, and the packing of sort keys and the reading of sorted keys
several passes with a temporary each. Each is one walk here (docs/design.md, "Third round":
3 million states into 30 million, measured here: membership 0.19 -> 0.06 s, merge ~0.5 ->
0.07 s). C through ctypes rather than numba: the same speed, without numba's half a second of
start-up in every process (a search, a test, each of Spark's Python workers).
"""
from __future__ import annotations

import ctypes
import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import numpy as np

ABI = 4     # kc_abi() of the checker/native.c this module was written for


def _load() -> ctypes.CDLL:
    here = Path(__file__).resolve().parent
    paths = [here / f"_native{suffix}" for suffix in EXTENSION_SUFFIXES]
    spec = importlib.util.find_spec("kcheck._native")
    if spec is not None and spec.origin:
        paths.append(Path(spec.origin))
    for path in paths:
        if path.exists():
            lib = ctypes.CDLL(str(path))
            lib.kc_abi.restype = ctypes.c_int64
            if lib.kc_abi() != ABI:
                raise ImportError(f"{path} was built from another checker/native.c: rebuild it "
                                  f"with `sh scripts/setup.sh` (or `pip install -e .`)")
            return lib
    raise ImportError("checker/native.c is not built (checker/_native*.so is missing): install "
                      "kcheck with `sh scripts/setup.sh` (or `pip install -e .`), which compiles it")


_P, _I = ctypes.c_void_p, ctypes.c_int64
_lib = _load()


def _keep_freed_memory():
    """glibc's malloc hands every array above 128 KB back to the kernel when it is freed, and
    the next one is faulted in again, page by page: a search allocates a block's arrays (a few
    MB each) thousands of times. Up to 32 MB (glibc's most) they now stay in the heap and are
    reused (two_phase N=8: system time 0.29 -> 0.16 s of a 1.1 s search; peak +3 MB)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)     # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)    # M_TRIM_THRESHOLD: keep up to this much free at the top
    except (OSError, AttributeError):  # not glibc: its own policy stands
        pass


_keep_freed_memory()
_lib.kc_absent.argtypes = [_P, _P, _I, _I, _I, _P, _P, _I, _I, _P]
_lib.kc_merge.argtypes = [_P, _P, _I, _I, _I, _P, _P, _I, _I]
_lib.kc_pack_positions.argtypes = [_P, _I, _I, _P]
_lib.kc_first_positions.argtypes = [_P, _I, _I, _P]
_lib.kc_first_positions.restype = _I
_lib.kc_pack_runs.argtypes = [_P, _P, _I, _P, _I, _I, _I, _P]
_lib.kc_first_in_runs.argtypes = [_P, _I, _I, _I, _P, _P, _P, _P]
_lib.kc_first_in_runs.restype = _I
_lib.kc_expand_constant.argtypes = [_P, _I, _I, _I, _P, _P, _P, _I, _P, _I, _P, _P, _I, _I]
_lib.kc_expand_constant.restype = _I
_lib.kc_merge_runs.argtypes = [_P, _P, _P, _I, _P, _P, _P, _I, _I, _P, _P, _P]
_lib.kc_merge_runs.restype = _I
_lib.kc_first_gather.argtypes = [_P, _I, _I, _P, _P, _I, _I, _P, _P, _P]
_lib.kc_first_gather.restype = _I
_lib.kc_pack_run_list.argtypes = [_P, _P, _P, _I, _I, _I, _I, _P]
_lib.kc_collapse.argtypes = [_P, _I, _I, _I, _P, _P, _P, _I, _P, _P, _P, _I, _I, _P, _P, _P]
_lib.kc_collapse.restype = _I


def _at(a: np.ndarray | None):
    return None if a is None else a.ctypes.data


def _words(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint64)


def _rows(K: np.ndarray) -> np.ndarray:
    """Keys as rows of contiguous words (a row's stride may be longer than the row)."""
    K = K if K.dtype == np.uint64 and K.strides[1] == 8 else np.ascontiguousarray(K, np.uint64)
    return K


def absent(V: np.ndarray, K: np.ndarray | None, n: int, u: np.ndarray,
           uk: np.ndarray | None) -> np.ndarray:
    """Mask of the states ``u`` (fingerprints; with their keys ``uk`` when the set keeps keys
    ``K``, one row per key) not among the first ``n`` of the sorted set ``V``: one forward walk
    through V, galloping, when u is sorted (a query out of order starts afresh)."""
    u = _words(u)
    out = np.empty(len(u), dtype=bool)
    if K is None:
        _lib.kc_absent(_at(V), None, 0, 0, n, _at(u), None, 0, len(u), _at(out))
    else:
        uk = _rows(uk)
        _lib.kc_absent(_at(V), _at(K), K.strides[0] // 8, K.shape[0], n, _at(u), _at(uk),
                       uk.strides[0] // 8, len(u), _at(out))
    return out


def merge(V: np.ndarray, K: np.ndarray | None, n: int, new: np.ndarray,
          newk: np.ndarray | None):
    """The sorted ``new`` states (none already present) merged into the first ``n`` of ``V``
    (and their keys into ``K``), in place, one backward walk: V has room for n + len(new)."""
    new = _words(new)
    if K is None:
        _lib.kc_merge(_at(V), None, 0, 0, n, _at(new), None, 0, len(new))
    else:
        newk = _rows(newk)
        _lib.kc_merge(_at(V), _at(K), K.strides[0] // 8, K.shape[0], n, _at(new), _at(newk),
                      newk.strides[0] // 8, len(new))


def first_positions(fp: np.ndarray, b: int) -> np.ndarray:
    """Positions of the first occurrence of each distinct value of ``fp``, in ascending order of
    the values, when every value leaves ``b`` bits free above it for a position (b >= the bits
    of len(fp) - 1). One np.sort of (value, position) words; the packing before it and the
    reading of the first positions after it are one pass each."""
    fp = _words(fp)
    key = np.empty(len(fp), dtype=np.uint64)
    _lib.kc_pack_positions(_at(fp), len(fp), b, _at(key))
    key.sort()
    out = np.empty(len(fp), dtype=np.int64)
    return out[:_lib.kc_first_positions(_at(key), len(fp), b, _at(out))]


def first_in_runs(fp: np.ndarray, action: np.ndarray, runs: list[int], action_bits: int,
                  run_bits: int) -> np.ndarray:
    """first_of_each over sorted runs (checker/explore.py) for values that leave
    ``action_bits + run_bits`` bits free above them: one np.sort of (value, action instance,
    run) words; a run being sorted, the k-th time run r appears in the sorted words is its k-th
    element, so one pass with a counter per run recovers every first occurrence's position
    (no argsort of the run numbers, no inverse permutation)."""
    fp = _words(fp)
    action = np.ascontiguousarray(action)
    if action.dtype.itemsize not in (1, 2, 4) or action.dtype.kind not in "iu":
        action = action.astype(np.int32)
    starts = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum(runs, out=starts[1:])
    key = np.empty(len(fp), dtype=np.uint64)
    tag_bits = action_bits + run_bits
    _lib.kc_pack_runs(_at(fp), _at(action), action.dtype.itemsize, _at(starts), len(runs),
                      tag_bits, run_bits, _at(key))
    key.sort()
    seen = np.zeros(len(runs), dtype=np.int64)
    small = len(fp) < (1 << 31)       # positions as 32-bit integers where they fit (less memory)
    out = np.empty(len(fp), dtype=np.int32 if small else np.int64)
    m = _lib.kc_first_in_runs(_at(key), len(fp), tag_bits, run_bits, _at(starts), _at(seen),
                              _at(out) if small else None, None if small else _at(out))
    del key
    return out[:m].copy() if m < len(fp) // 2 else out[:m]



def address(a: np.ndarray) -> int:
    """Where an array's data begins (for the functions that take addresses)."""
    return a.__array_interface__["data"][0]


class Steps:
    """A block's successors, their states' positions and their action instances, written in
    place: room for ``room`` steps of states of ``words`` words (action instances as
    ``act_dtype``)."""

    def __init__(self, words: int, room: int, act_dtype):
        self.T = np.empty((words, room), dtype=np.uint64)
        self.parent = np.empty(room, dtype=np.int64)
        self.action = np.empty(room, dtype=act_dtype)
        self.n = 0
        self.room = room
        self._at = (address(self.T), address(self.parent), address(self.action))

    def put(self, T: np.ndarray, parent: np.ndarray, k: int):
        """Steps taken elsewhere (numpy's effects), appended."""
        n, c = self.n, len(parent)
        self.T[:, n:n + c] = T
        self.parent[n:n + c] = parent
        self.action[n:n + c] = k
        self.n = n + c

    def constant(self, S: np.ndarray, at_S: int, mask, at_keep: int, at_put: int, k: int,
                 loops: bool):
        """The steps of action instance k, whose writes are all constants (word w of a
        successor is ``S[w] & keep[w] | put[w]``, the words at addresses ``at_keep`` and
        ``at_put``), from the states of the block S (its data at ``at_S``, rows of contiguous
        words) where ``mask`` (a bool array, or True) holds, appended; the steps to the state
        itself left out unless ``loops``. One pass over the block, where numpy takes the
        positions, the states, the effect, the comparison and two compressions."""
        n, item = self.n, self.action.itemsize
        self.n = n + _lib.kc_expand_constant(
            at_S, S.strides[0] // 8, S.shape[0], S.shape[1],
            None if mask is True else address(mask), at_keep, at_put, int(loops),
            self._at[0] + 8 * n, self.room, self._at[1] + 8 * n, self._at[2] + item * n,
            item, k)

    def taken(self) -> tuple:
        """(successors, positions, action instances) of the steps appended."""
        n = self.n
        return self.T[:, :n], self.parent[:n], self.action[:n]


def merge_runs(a: tuple, b: tuple) -> tuple:
    """Two sorted runs of distinct one-word states, each (states, parents as int32, action
    instances as int16 or int32), merged into one; a state in both keeps b's parent and action
    instance only when b's action instance is lower (b's blocks come after a's: at equal
    instances a's parent is the lower). One pass: the level gathered so far is not sorted
    again with each new part (it was, with the doubling rule, two to three times a level)."""
    (afp, apar, aact), (bfp, bpar, bact) = a, b
    afp, bfp = _words(afp), _words(bfp)
    apar, bpar = (np.ascontiguousarray(x, dtype=np.int32) for x in (apar, bpar))
    dtype = np.int32 if np.dtype(aact.dtype).itemsize == 4 or bact.dtype.itemsize == 4 else np.int16
    aact, bact = (np.ascontiguousarray(x, dtype=dtype) for x in (aact, bact))
    room = len(afp) + len(bfp)
    fp = np.empty(room, dtype=np.uint64)
    par = np.empty(room, dtype=np.int32)
    act = np.empty(room, dtype=dtype)
    n = _lib.kc_merge_runs(address(afp), address(apar), address(aact), len(afp), address(bfp),
                           address(bpar), address(bact), len(bfp), np.dtype(dtype).itemsize,
                           address(fp), address(par), address(act))
    return fp[:n], par[:n], act[:n]


def first_gather(fp: np.ndarray, b: int, parent: np.ndarray, action: np.ndarray,
                 offset: int) -> tuple:
    """A block's distinct states in ascending order, each with the parent (plus ``offset``, as
    int32) and action instance of its first occurrence: first_positions and the gathers after it
    in one pass (fp leaves ``b`` bits free above it for a position; parent int64, action int16
    or int32)."""
    fp = _words(fp)
    n = len(fp)
    key = np.empty(n, dtype=np.uint64)
    _lib.kc_pack_positions(_at(fp), n, b, _at(key))
    key.sort()
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    action = np.ascontiguousarray(action)
    ofp = np.empty(n, dtype=np.uint64)
    opar = np.empty(n, dtype=np.int32)
    oact = np.empty(n, dtype=action.dtype)
    m = _lib.kc_first_gather(_at(key), n, b, _at(parent), _at(action), action.itemsize, offset,
                             _at(ofp), _at(opar), _at(oact))
    del key
    return ofp[:m].copy(), opar[:m].copy(), oact[:m].copy()


class Scratch:
    """The array a level's collapse sorts its keys in, kept for the whole search: above 32 MB
    (glibc's most, see _keep_freed_memory) a new one is mapped afresh for every collapse and
    the kernel zeroes its pages again (two_phase N=10: about 10 bytes of such keys a state).
    Kept, its pages are zeroed once: N=10's system time 0.97-1.25 -> 0.75-0.92 s in four
    alternated runs, for about 50 MB more at the peak (0.8 bytes a state)."""

    def __init__(self):
        self._words: np.ndarray | None = None

    def words(self, n: int) -> np.ndarray:
        """n uint64 words, valid until the next call (their values are not kept)."""
        if self._words is None or len(self._words) < n:
            self._words = None                 # let the old one go before mapping the new
            # a power of two: a level's collapses grow by doubling, so few grow it; pages
            # never written cost no memory
            self._words = np.empty(1 << max(16, (n - 1).bit_length()), dtype=np.uint64)
        return self._words[:n]


def collapse(runs: tuple, action_bits: int, V: np.ndarray, vn: int, before: tuple | None,
             scratch: Scratch | None = None) -> tuple:
    """A level's runs of one-word states (``runs``: lists of states, parents as int32, action
    instances as int16 or int32; each run sorted and distinct, run r's parents all after run
    r-1's), the least (action instance, run) of each state kept, the states among the first
    ``vn`` of the sorted visited set ``V`` dropped, merged with ``before`` (the level gathered so
    far, or None) -> (states, parents, action instances), sorted. One np.sort of packed (state,
    action instance, run) words, read in one pass that also tests the visited set and merges:
    the runs are never joined (first_of_each, Visited.absent and merge_runs did this in several
    passes, each with arrays of the runs' size). The states must leave action_bits plus the
    bits of the run count free. ``scratch``: where the keys are sorted (else a new array)."""
    rfp, rpar, ract = runs
    k = len(rfp)
    dtype = ract[0].dtype
    if before is not None and before[2].dtype != dtype:
        dtype = np.dtype(np.int32)
    ract = [a if a.dtype == dtype else a.astype(dtype) for a in ract]
    run_bits = max(1, (k - 1).bit_length())
    tag_bits = action_bits + run_bits
    lens = np.array([len(f) for f in rfp], dtype=np.int64)
    n = int(lens.sum())
    addr = np.array([[address(f) for f in rfp], [address(a) for a in ract],
                     [address(p) for p in rpar]], dtype=np.uint64).reshape(3, k)
    key = np.empty(n, dtype=np.uint64) if scratch is None else scratch.words(n)
    _lib.kc_pack_run_list(_at(addr[0]), _at(addr[1]), _at(lens), k, dtype.itemsize, tag_bits,
                          run_bits, _at(key))
    key.sort()
    seen = np.zeros(k, dtype=np.int64)
    nb = 0 if before is None else len(before[0])
    if before is not None:
        bfp, bpar, bact = _words(before[0]), np.ascontiguousarray(before[1], dtype=np.int32), \
            np.ascontiguousarray(before[2], dtype=dtype)
    else:
        bfp = bpar = bact = None
    room = nb + n
    ofp = np.empty(room, dtype=np.uint64)
    opar = np.empty(room, dtype=np.int32)
    oact = np.empty(room, dtype=dtype)
    m = _lib.kc_collapse(_at(key), n, tag_bits, run_bits, _at(addr[2]), _at(seen), _at(V), vn,
                         _at(bfp), _at(bpar), _at(bact), nb, dtype.itemsize, _at(ofp), _at(opar),
                         _at(oact))
    del key
    return ofp[:m], opar[:m], oact[:m]
