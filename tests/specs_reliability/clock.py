"""A clock that ticks for ever, checked with the clock capped by a search bound: the cut at the
cap must not hide the violations that lie beyond it.

- rings (progress): the alarm eventually rings, with ticking fair. It is false: the clock may
  tick for ever and Ring is never fair; but in the bounded graph the tick at the cap is cut and
  still counts as enabled, so the fair cycle that refutes it is not there.
- in the unbounded protocol the clock stops at LIMIT (Tick requires clock < LIMIT) and nothing
  else can run: a deadlock, beyond the cap.
"""
from kcheck import Bool, Int, Spec

spec = Spec("clock", __doc__)
LIMIT = 10
spec.param("cap", 3, 1, 20, "the search bound of the clock (LIMIT is reached when cap >= LIMIT)")


@spec.state
def state(p):
    return {"clock": Int(0, p.cap, search_bound=True), "rang": Bool}


@spec.init
def init(p):
    yield {"clock": 0, "rang": False}


@spec.action
def Tick(s, p):
    """The clock ticks, up to LIMIT."""
    s.require(s.clock < LIMIT)
    s.clock = s.clock + 1


@spec.action
def Ring(s, p):
    """The alarm rings once, at one o'clock."""
    s.require(~s.rang, s.clock == 1)
    s.rang = True


@spec.always_eventually("rings", fair=["Tick"])
def rings(s, p):
    """The alarm eventually rings."""
    return s.rang


@spec.terminal
def never(s, p):
    """No state may end the behaviour."""
    return s.rang & ~s.rang


spec.variant("clock", "as above", default=True)
