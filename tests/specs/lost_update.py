"""A counter with a read-modify-write client: a toy with two known "bugs", to test `kcheck bugs`.

The fix (compare-and-set) is the default; `no-cas` undoes it and loses an update; `harmless`
undoes nothing that matters, so its recorded bug is not rediscovered.

Properties:
- no-lost-update: the counter never falls behind the number of completed increments.
"""
from kcheck import Array, Bool, Int, Spec

spec = Spec("lost_update", __doc__)


@spec.state
def state(p):
    return {"counter": Int(0, 2), "read": Array(Int(0, 2), 2), "reading": Array(Bool, 2),
            "done": Int(0, 2)}


@spec.init
def init(p):
    yield {"counter": 0, "read": [0, 0], "reading": [False, False], "done": 0}


@spec.action(c=range(2))
def Read(s, p, c):
    s.require(~s.reading[c], s.done < 2)
    s.read[c] = s.counter
    s.reading[c] = True


@spec.action(c=range(2))
def Write(s, p, c):
    s.require(s.reading[c])
    if s.variant != "no-cas":
        s.require(s.counter == s.read[c])   # compare-and-set: a stale read is refused
    s.counter = s.read[c] + 1
    s.reading[c] = False
    s.done = s.done + 1


@spec.invariant("no-lost-update")
def no_lost_update(s, p):
    """The counter never falls behind the number of completed increments."""
    return s.counter >= s.done


spec.variant("cas", "the fix: writes are compare-and-set", default=True)
spec.variant("no-cas", "the fix undone: a write overwrites", violates=["no-lost-update"])
spec.variant("harmless", "the same rule under another name", violates=[])
spec.known_bug("TOY-1", broke="two clients read 0 and both write 1", fix="commit 0000000",
               code="Counter.write", variant="no-cas", property="no-lost-update")
spec.known_bug("TOY-2", broke="not a bug at all", fix="none", code="Counter.write",
               not_expressible="a second counter")
