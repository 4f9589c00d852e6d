"""The classic_group adapter on the in-process coordinator (checker/conform/inprocess.py).

The mapping is the broker adapter's (checker/conform/classic_group.py): the same requests for
each spec step, the same client played by the driver, the same ``view``; what differs is only
how a request waits, which on a broker is a thread and a clock:

- a JoinGroup the coordinator parks until its join phase ends is an ``inprocess.Parked``: the
  "pool" runs the request at once and hands back the answer or the parked request, whose
  ``result`` never waits (nothing at the coordinator changes between two requests);
- the new group's first join phase, which a broker ends by its initial rebalance delay (a timer,
  group.initial.rebalance.delay.ms of the broker settings), ends in-process when the spec's
  CompleteJoin fires that timer (GroupMetadataManager.classicGroupJoinKey: "join-" + group id;
  its operation, tryCompleteInitialRebalanceElseSchedule, reschedules itself while members keep
  arriving, so it is fired until the join phase ends). Later join phases end as on a broker:
  the pending member that holds them open leaves (classic_group._hold_join_phase);
- one connection serves every member: the shard reads every request as it comes.

ClassicGroup keeps plain fields (members, generation, state, leader, the parked futures) that a
SnapshotRegistry revert does not undo, and a mid-rebalance group cannot be rebuilt from
records. So ``revert_is_exact`` is False: the exhaustive walk restores a state by rebuilding it
(``Harness.rebuild``: revert to a snapshot taken before the group existed, then replay the
journal of requests along the path), and the client state is copied member by member."""
from __future__ import annotations

import copy

from kcheck.conform.classic_group import CLIENT_SIDE, ClassicGroupAdapter
from kcheck.conform.driver import NotDrivable, TraceRun
from kcheck.conform.inprocess import IN_PROCESS

# how often the initial delay's timer may reschedule itself before the join phase must end
_INITIAL_DELAY_FIRINGS = 16


class _Answered:
    """An answer the coordinator gave at once, with a future's face."""

    def __init__(self, response):
        self.response = response

    def done(self) -> bool:
        return True

    def result(self, timeout=None):
        return self.response


class _InProcessPool:
    """Where the broker adapter submits a JoinGroup to a thread: run at once, in this thread."""

    def submit(self, fn, *args):
        from kcheck.conform.inprocess import Parked
        answer = fn(*args)
        return answer if isinstance(answer, Parked) else _Answered(answer)

    def shutdown(self, *a, **k) -> None:
        pass


class InProcessClassicGroupAdapter(ClassicGroupAdapter):
    """classic_group's adapter on Kafka's GroupCoordinatorShard in-process."""
    # a revert leaves ClassicGroup's plain fields as they were changed: states are rebuilt
    revert_is_exact = False
    # steps that send nothing: the driver's client only (counted apart)
    client_side_actions = tuple(CLIENT_SIDE)

    def clone_state(self, state: dict) -> dict:
        """The client state, each member copied (drive replaces a member's fields, never
        mutates what they hold)."""
        out = dict(state)
        out["members"] = [copy.copy(m) for m in state["members"]]
        return out

    def begin(self, run: TraceRun, initial: dict) -> None:
        if initial["group_state"] != "Empty":
            # the setup prefix (_setup_mid_rebalance) waits on each round's join phase, the
            # first ended by the initial delay's timer, which nothing fires in-process before
            # the trace's own CompleteJoin
            raise NotDrivable("the in-process adapter starts from a new group only: a trace "
                              "that starts mid-rebalance replays on a broker")
        from kcheck.conform.classic_group import Member
        run.state["members"] = [Member() for _ in range(run.params.members)]
        run.state["pool"] = _InProcessPool()
        admin = self._admin(run)
        admin.create_topic(run.name, run.params.partitions)
        run.state["coordinator"] = IN_PROCESS
        self._hold_join_phase(run)

    def _conn(self, run: TraceRun, me):
        return self._admin(run)

    def _complete_join(self, run: TraceRun) -> dict:
        if run.state.get("initial_rebalance"):
            harness = self._admin(run).harness
            parked = [x.joining for x in run.state["members"] if x.joining is not None]
            for _ in range(_INITIAL_DELAY_FIRINGS):
                if all(p.done() for p in parked) or not harness.fire(f"join-{run.name}"):
                    break
        return super()._complete_join(run)

    def _release_if_empty(self, run: TraceRun) -> None:
        """As on a broker; and when the group empties during a new group's first join phase,
        the initial delay's timer is fired: GroupMetadataManager.maybeCompleteJoinPhase never
        ends a join phase that began in Empty (previousState != EMPTY), only the timer does,
        which on a broker fires by itself within group.initial.rebalance.delay.ms; the spec's
        removal empties the group (generation + 1) in the same step."""
        super()._release_if_empty(run)
        if run.state.get("initial_rebalance") and not any(self._describe(run)["in_group"]):
            harness = self._admin(run).harness
            for _ in range(_INITIAL_DELAY_FIRINGS):
                if self._describe(run)["group_state"] != "PreparingRebalance" or \
                        not harness.fire(f"join-{run.name}"):
                    break
            run.state.pop("initial_rebalance", None)

    def end(self, run: TraceRun) -> None:
        pass
