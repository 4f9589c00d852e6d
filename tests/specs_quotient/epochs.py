"""Order-only domains (spec.epoch): a group epoch that members copy, leave and rejoin. The
variants after "exact" each misuse an epoch value once, on the line marked "# refused: NAME",
which the language must refuse there (tests/test_quotient.py); "catch-up" is accepted by the
language but not exact for the quotient (a member's epoch + 1 stored below the group's), which
the quotient search must detect."""
from kcheck import And, Array, Int, Spec

spec = Spec("quotient_epochs", __doc__)
spec.param("members", 2, lo=1, hi=3)
spec.param("cap", 3, lo=1, hi=12, doc="epoch cap of the search without the quotient")

NO_EPOCH = -1
Epoch = spec.epoch("epoch", sentinels=(NO_EPOCH,), doc="the group's epochs", cap="cap")


@spec.state
def state(p):
    return {
        "epoch": Int(0, p.cap, search_bound=True, epoch=Epoch),
        "member_epoch": Array(Int(NO_EPOCH, p.cap, search_bound=True, epoch=Epoch), p.members),
        "count": Int(0, 3),
    }


@spec.init
def init(p):
    yield {"epoch": 0, "member_epoch": [NO_EPOCH] * p.members, "count": 0}


def members(p):
    return range(p.members)


@spec.action(m=members)
def Join(s, p, m):
    """A member joins at the group's epoch (one past it in the skip-ahead variant)."""
    s.require(s.member_epoch[m] == NO_EPOCH)
    s.member_epoch[m] = s.epoch + 1 if s.variant == "skip-ahead" else s.epoch


@spec.action()
def Bump(s, p):
    """The group moves to its next epoch."""
    s.epoch = s.epoch + 1


@spec.action(m=members)
def Leave(s, p, m):
    s.member_epoch[m] = NO_EPOCH


@spec.action(m=members)
def Misuse(s, p, m):
    """One use of an epoch value that is not order-only, per variant."""
    v = s.variant
    if v == "literal":
        s.require(s.epoch >= 1)  # refused: literal
    elif v == "minus-one":
        s.member_epoch[m] = s.epoch - 1  # refused: minus-one
    elif v == "plain-int":
        s.require(s.count < s.epoch)  # refused: plain-int
    elif v == "store-outside":
        s.count = s.member_epoch[m]  # refused: store-outside
    elif v == "twice":
        s.epoch = s.epoch + 1 + 1  # refused: twice
    elif v == "literal-assign":
        s.member_epoch[m] = 0  # refused: literal-assign
    elif v == "catch-up":
        s.require(s.member_epoch[m] != NO_EPOCH, s.member_epoch[m] < s.epoch)
        s.member_epoch[m] = s.member_epoch[m] + 1
    else:
        s.require(False)


@spec.invariant("member-not-ahead")
def member_not_ahead(s, p):
    """No member's epoch is ahead of the group's."""
    return And(*[s.member_epoch[m] <= s.epoch for m in members(p)])


@spec.invariant("members-apart")
def members_apart(s, p):
    """No two members hold the same epoch (violated once two join between bumps)."""
    return And(*[(s.member_epoch[a] == NO_EPOCH) | (s.member_epoch[a] != s.member_epoch[b])
                 for a in members(p) for b in members(p) if a < b])



@spec.invariant("member-keeps-up")
def member_keeps_up(s, p):
    """A member is at most one epoch behind the group (violated at epoch 2: past a cap of 1)."""
    return And(*[(s.member_epoch[m] == NO_EPOCH) | (s.member_epoch[m] + 1 >= s.epoch)
                 for m in members(p)])


spec.symmetry("member", count=lambda p: p.members, arrays={"member_epoch": "slot"},
              why="members are told apart only by their slot")

spec.variant("exact", "epochs only copied and bumped at the top", default=True,
             violates=["members-apart", "member-keeps-up"])
spec.variant("skip-ahead", "a member joins one epoch ahead",
             violates=["member-not-ahead", "members-apart", "member-keeps-up"])
for _name in ("literal", "minus-one", "plain-int", "store-outside", "twice", "literal-assign"):
    spec.variant(_name, f"refused: {_name}")
spec.variant("catch-up", "a member catches up one epoch at a time",
             violates=["members-apart", "member-keeps-up"])
