"""Conformance against a real Kafka: replay a spec's traces on a broker, step by step, and compare
each step's outcome and Kafka's visible state with the spec's (``kcheck conform``).

kafka.py fetches Kafka's jars by version, broker.py starts a KRaft broker from them, wire.py
speaks the wire protocol (kio), driver.py replays traces through one Adapter per spec."""
