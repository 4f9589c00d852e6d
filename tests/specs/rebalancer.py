"""A group that an environment disturbs, for the progress verdicts that state their bound
(checker/environment.py; tests/test_progress_decided.py).

- Rebalance (environment): the group epoch rises, as a join or a leave bumps it.
- Flip (environment): the group is disturbed (mode 1), or disturbed again (1 <-> 2).
- Settle (protocol, fair): a disturbance in mode m is dealt with.
- Sync (protocol, fair): the member catches up with the group epoch; in variant ``chase`` it
  bumps the epoch again as it does, a protocol livelock that only an epoch cap stops.

"converges" (the member at the group epoch and no disturbance pending) holds for every behaviour
with at most E disturbances in the default variant; with no bound, Flip for ever (1, 2, 1, ...)
is an environment-driven lasso, since Settle(1) and Settle(2) are never enabled continuously.
In ``no-settle-2`` a disturbance left in mode 2 is never dealt with: a protocol-driven lasso.
"""
from kcheck import If, Int, Spec

spec = Spec("rebalancer", __doc__)
spec.param("max_epoch", 2, 1, 6, "the cap of the epochs")


@spec.state
def state(p):
    return {"epoch": Int(0, p.max_epoch, search_bound=True),
            "member_epoch": Int(0, p.max_epoch, search_bound=True),
            "mode": Int(0, 2)}


@spec.init
def init(p):
    yield {"epoch": 0, "member_epoch": 0, "mode": 0}


@spec.action
def Rebalance(s, p):
    """A member joins or leaves: the group epoch rises."""
    s.epoch = s.epoch + 1


@spec.action
def Flip(s, p):
    """The environment disturbs the group (mode 1), or disturbs it again (1 <-> 2)."""
    s.mode = If(s.mode == 1, 2, 1)


@spec.action(m=[1, 2])
def Settle(s, p, m):
    """The protocol deals with a disturbance in mode m."""
    s.require(s.mode == m)
    if s.variant == "no-settle-2" and m == 2:
        s.require(False)
    s.mode = 0


@spec.action
def Sync(s, p):
    """The member catches up with the group epoch (in chase, bumping it again)."""
    s.require(s.member_epoch < s.epoch)
    if s.variant == "chase":
        s.member_epoch = s.epoch
        s.epoch = s.epoch + 1
    else:
        s.member_epoch = s.epoch


spec.environment_actions(["Rebalance", "Flip"], bound=2, cap="max_epoch",
                         why="joins, leaves and disturbances are done to the group")


@spec.always_eventually("converges", fair=["Settle", "Sync"])
def converges(s, p):
    """The member reaches the group epoch and no disturbance is pending."""
    return (s.member_epoch == s.epoch) & (s.mode == 0)


spec.variant("default", "as above", default=True)
spec.variant("no-settle-2", "a disturbance in mode 2 is never dealt with", violates=["converges"])
spec.variant("chase", "Sync bumps the epoch again: a livelock only the cap stops")
