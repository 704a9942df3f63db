"""An existing topic less durable than the settings ask is refused; with the brokers' defaults nothing is checked."""

import pytest

from spark_apps.core.errors import TopicConfigError
from spark_apps.core.settings import Settings
from spark_apps.io.topics import check_topic_durability, durability_configs


class FakeAdmin:
    """Answers describe_configs like kafka-python's admin client, for one topic."""

    def __init__(self, min_isr: str) -> None:
        self.min_isr = min_isr

    def describe_configs(self, resources, config_filter):
        return {"topic": {resources[0].name: {"min.insync.replicas": {"value": self.min_isr}}}}


def replicated(count: int) -> list[dict]:
    return [{"partition_index": p, "replica_nodes": list(range(1, count + 1))} for p in range(3)]


CLUSTER = Settings(topic_replication_factor=3, topic_min_insync_replicas=2)


def test_a_cluster_topic_asks_for_its_min_insync_replicas():
    assert durability_configs(CLUSTER) == {"min.insync.replicas": "2"}
    assert durability_configs(Settings()) == {}


def test_a_topic_as_durable_as_asked_passes():
    check_topic_durability(FakeAdmin("2"), "t", replicated(3), CLUSTER)


@pytest.mark.parametrize(("replicas", "min_isr", "message"), [
    (1, "2", "1 replicas \\(needs 3\\)"),
    (3, "1", "min.insync.replicas=1 \\(needs 2\\)"),
])
def test_a_less_durable_topic_is_refused_naming_what_is_missing(replicas, min_isr, message):
    with pytest.raises(TopicConfigError, match=message):
        check_topic_durability(FakeAdmin(min_isr), "t", replicated(replicas), CLUSTER)


def test_with_the_brokers_defaults_a_single_replica_topic_passes():
    check_topic_durability(FakeAdmin("1"), "t", replicated(1), Settings())
