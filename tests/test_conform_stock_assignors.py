

def test_at_kafkas_default_assignment_timing_the_zombie_commit_is_accepted_too():
    """Kafka 4.3's defaults (the target deferred by group.consumer.assignment.interval.ms and
    computed on the executor): the joins wait for their target (ConsumerGroupAdapter._settle),
    and the trace conforms step for step, zombie included. This module's own broker."""
    from kcheck.conform.broker import Broker, BrokerError
    try:
        broker = Broker("4.3.1", default_timing=True).start()
    except BrokerError as e:
        pytest.fail(f"the Kafka 4.3.1 broker at default timing could not be started: {e}",
                    pytrace=False)
    try:
        assert "group.consumer.assignment.interval.ms" not in broker.settings
        job = driver.load_job(SCENARIOS / "stock_assignor_zombie_commit_uniform.json", SPEC.name)
        adapter = ConsumerGroupAdapter(assignor="uniform")
        adapter.default_timing = True
        out = driver.run_trace(broker, adapter, SPEC, job, "4.3.1")
        assert out.kind == driver.CONFORMS, out.text()
        owner, zombie = _commits(out)
        assert owner["error"] == zombie["error"] == "NONE"
        assert _committed(broker, owner["group"], owner["group"], 2) == zombie["offset"] < owner["offset"]
    finally:
        broker.stop()
