"""my_commit: consumer_group with its offset-commit rule changed, as variant any-partition.

Written by `kcheck new --from consumer_group my_commit`. The spec is the shipped consumer_group,
imported (not copied, so it follows kcheck's updates) and derived under its own name: its saved
traces name this file and replay against it, and its record stays apart from the shipped one's.
Every shipped variant is here unchanged; the one added, any-partition, replaces the rule
"offset-commit" (ConsumerGroup.validateOffsetCommit, KIP-1251) with a copy that leaves out one
guard. The workflow:

  kcheck check my_commit.py --variant any-partition
      the search at the default parameters, against the variant's record below
  kcheck compare my_commit.py --rule offset-commit --variants any-partition consumer_group:kip1251
      the copied rule against the shipped one, with Z3, in every state the invariants allow
  kcheck prove my_commit.py --variant any-partition --property no-spurious-fencing
      a property for every epoch

To change another rule, `kcheck list` names each shipped spec's rules; consumer_group's are
in spec/consumer_group.py (the module kcheck.spec.consumer_group).
"""
from kcheck import And, Or
from kcheck.spec.consumer_group import spec as shipped

spec = shipped.derive("my_commit", __doc__)

# The shipped rule (kip1251_commit in kcheck.spec.consumer_group), as Kafka 4.3 checks the epoch
# of an offset commit:
#     Or(epoch == s.member_epoch[m],
#        And(epoch < s.member_epoch[m], s.holds[m][q] != Hold.NONE,
#            s.assignment_epoch[m][q] <= epoch))
# The copy below leaves out `s.holds[m][q] != Hold.NONE`: a commit below the member epoch is then
# accepted for a partition the member no longer holds when its epoch is at least the partition's
# assignment epoch, which is 0 once the partition is released.


@spec.rule("offset-commit", variant="any-partition")
def any_partition_commit(s, p, m, q, epoch):
    """assignment epoch <= commit epoch <= member epoch, whether the member holds the partition or not."""
    return Or(epoch == s.member_epoch[m],
              And(epoch < s.member_epoch[m], s.assignment_epoch[m][q] <= epoch))


# The variant's record: the properties `kcheck check my_commit.py --variant any-partition` finds
# violated at the default parameters. `kcheck check my_commit.py --all-variants` and `kcheck prove`
# compare their verdicts with it and name any that changes. The copy breaks the properties the
# shipped default breaks, no more; its zombie commit is shorter.
default = shipped.variants[shipped.default_variant]
spec.variant("any-partition", "kip1251 without the check that the member still holds the partition",
             violates=sorted(default.expected_violations),
             findings={**default.findings,
                       "no-zombie-commit": "5 steps: member 0 sends a commit for p1 at epoch 1 and "
                       "leaves, p1 goes to member 1, member 0 rejoins under the same member id at "
                       "epoch 3, and its commit is accepted: p1 is no longer member 0's, and its "
                       "assignment epoch there is 0 (11 steps in the shipped kip1251)"})
