"""Two-phase commit, as in the TLA+ examples' TwoPhase (Lamport): the calibration spec.

A transaction manager (TM) and N resource managers (RMs). Each RM may prepare or, while still
working, choose to abort; the TM commits once every RM has prepared and aborts whenever it
likes before that; messages are a set that is never emptied, so a message can be received any
number of times. The distinct-state counts equal TLC's on the same model (tests assert them).

Properties:
- consistent: no resource manager has committed while another has aborted.
"""
from kcheck import Array, Bool, Enum, Forall, Spec, And

spec = Spec("two_phase", __doc__)
spec.param("N", 3, lo=1, hi=12, doc="number of resource managers")

RMState = Enum("RMState", "working prepared committed aborted")
TMState = Enum("TMState", "init committed aborted")


@spec.state
def state(p):
    return {
        "rm_state": Array(RMState, p.N),
        "tm_state": TMState,
        "tm_prepared": Array(Bool, p.N),
        # the message set: Prepared(rm) for each RM, Commit and Abort
        "msg_prepared": Array(Bool, p.N),
        "msg_commit": Bool,
        "msg_abort": Bool,
    }


@spec.init
def init(p):
    yield {"rm_state": [RMState.working] * p.N, "tm_state": TMState.init,
           "tm_prepared": [False] * p.N, "msg_prepared": [False] * p.N,
           "msg_commit": False, "msg_abort": False}


def rms(p):
    return range(p.N)


@spec.action(rm=rms, actors=("RM{rm}", "TM"))
def TMRcvPrepared(s, p, rm):
    """The TM receives Prepared from an RM."""
    s.require(s.tm_state == TMState.init, s.msg_prepared[rm])
    s.tm_prepared[rm] = True


@spec.action(actors=("TM", "RMs"))
def TMCommit(s, p):
    """The TM commits once every RM has prepared (the broken variant drops that wait)."""
    s.require(s.tm_state == TMState.init)
    if s.variant != "commit-without-prepares":
        s.require(Forall(rms(p), lambda rm: s.tm_prepared[rm]))
    s.tm_state = TMState.committed
    s.msg_commit = True


@spec.action(actors=("TM", "RMs"))
def TMAbort(s, p):
    """The TM aborts, at any time before it commits."""
    s.require(s.tm_state == TMState.init)
    s.tm_state = TMState.aborted
    s.msg_abort = True


@spec.action(rm=rms, actors=("RM{rm}", "TM"))
def RMPrepare(s, p, rm):
    s.require(s.rm_state[rm] == RMState.working)
    s.rm_state[rm] = RMState.prepared
    s.msg_prepared[rm] = True


@spec.action(rm=rms, actors=("RM{rm}", "RM{rm}"))
def RMChooseToAbort(s, p, rm):
    s.require(s.rm_state[rm] == RMState.working)
    s.rm_state[rm] = RMState.aborted


@spec.action(rm=rms, actors=("TM", "RM{rm}"))
def RMRcvCommitMsg(s, p, rm):
    s.require(s.msg_commit)
    s.rm_state[rm] = RMState.committed


@spec.action(rm=rms, actors=("TM", "RM{rm}"))
def RMRcvAbortMsg(s, p, rm):
    s.require(s.msg_abort)
    s.rm_state[rm] = RMState.aborted


@spec.invariant("consistent")
def consistent(s, p):
    """No resource manager has committed while another has aborted."""
    return Forall(rms(p), lambda i: Forall(rms(p), lambda j: ~And(
        s.rm_state[i] == RMState.committed, s.rm_state[j] == RMState.aborted)))


@spec.terminal
def done(s, p):
    """The protocol may stop once the TM has decided and every RM has learnt it."""
    return Forall(rms(p), lambda rm: (s.rm_state[rm] == RMState.committed) |
                  (s.rm_state[rm] == RMState.aborted))


@spec.always_eventually("decides", fair=["TMCommit", "TMAbort", "TMRcvPrepared", "RMPrepare",
                                          "RMRcvCommitMsg", "RMRcvAbortMsg"])
def decides(s, p):
    """Every resource manager eventually commits or aborts."""
    return done(s, p)


# Lemmas: together they make `consistent` inductive, so `kcheck prove` proves it for any run.
@spec.invariant("commit-sent-by-tm", lemma=True)
def commit_sent_by_tm(s, p):
    """A Commit message exists only once the TM has committed."""
    return ~s.msg_commit | (s.tm_state == TMState.committed)


@spec.invariant("abort-sent-by-tm", lemma=True)
def abort_sent_by_tm(s, p):
    """An Abort message exists only once the TM has aborted."""
    return ~s.msg_abort | (s.tm_state == TMState.aborted)


@spec.invariant("committed-after-commit-message", lemma=True)
def committed_after_commit_message(s, p):
    """A resource manager has committed only after the TM sent Commit."""
    return Forall(rms(p), lambda rm: (s.rm_state[rm] != RMState.committed) | s.msg_commit)


@spec.invariant("prepared-received-was-sent", lemma=True)
def prepared_received_was_sent(s, p):
    """The TM has recorded only Prepared messages that were sent."""
    return Forall(rms(p), lambda rm: ~s.tm_prepared[rm] | s.msg_prepared[rm])


@spec.invariant("working-has-not-prepared", lemma=True)
def working_has_not_prepared(s, p):
    """A resource manager still working has sent no Prepared message."""
    return Forall(rms(p), lambda rm: (s.rm_state[rm] != RMState.working) | ~s.msg_prepared[rm])


@spec.invariant("prepared-aborts-only-on-abort", lemma=True)
def prepared_aborts_only_on_abort(s, p):
    """A resource manager that sent Prepared has aborted only after the TM sent Abort."""
    return Forall(rms(p), lambda rm: (s.rm_state[rm] != RMState.aborted) | ~s.msg_prepared[rm] |
                  s.msg_abort)


@spec.invariant("commit-after-all-prepared", lemma=True)
def commit_after_all_prepared(s, p):
    """The TM has committed only after receiving Prepared from every resource manager."""
    return (s.tm_state != TMState.committed) | Forall(rms(p), lambda rm: s.tm_prepared[rm])


spec.variant("lamport", "TwoPhase exactly as in the TLA+ examples", default=True)
# the early commit also breaks the lemma that `consistent` rests on (kept as a separate list so
# that tests/test_core.py can still blank the record of `consistent` alone)
spec.variant("commit-without-prepares", "the TM commits without waiting for every Prepared",
             violates=["consistent"] + ["commit-after-all-prepared"])
