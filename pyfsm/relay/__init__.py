"""The outbox relay: publishes the rows the transitions wrote to Kafka, in order, once each.

``publisher`` is the relay itself, ``kafka`` the producer's settings, ``leadership`` the
one-relay-per-topic lease, ``events`` the message format. Importing this package loads
confluent_kafka; ``import pyfsm`` alone does not.
"""

from .events import Lag
from .publisher import Relay, RelayStats, lag

__all__ = ["Lag", "Relay", "RelayStats", "lag"]
