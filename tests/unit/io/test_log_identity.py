"""The rule that tells the log the stream read from a topic recreated or truncated under the same name."""

from spark_apps.io.log_identity import checkpoints_reading, log_problem, record_source, recorded_source, refusal

TOPIC = "shop.events"


def test_the_same_topic_grown_since_the_stream_read_it_is_its_log():
    assert log_problem(TOPIC, "id-a", "id-a", {0: 10, 1: 5}, {0: 12, 1: 5}) == ""


def test_a_topic_with_another_id_was_recreated_even_when_its_offsets_have_grown_past_what_was_read():
    problem = log_problem(TOPIC, "id-a", "id-b", {0: 10}, {0: 500})
    assert problem == ("topic shop.events has id id-b, but the stream read the topic with id id-a: it was deleted "
                       "and recreated")


def test_offsets_behind_what_was_read_mean_a_recreated_or_truncated_topic_even_without_a_recorded_id():
    problem = log_problem(TOPIC, None, "id-b", {0: 10, 1: 2_000, 2: 0}, {0: 10, 1: 3, 2: 0})
    assert problem == ("the offsets of topic shop.events went backwards (partition 1 ends at 3 but was read to "
                       "2,000): it was recreated or truncated")


def test_a_partition_that_disappeared_counts_as_gone_backwards():
    assert "partition 1 ends at nothing but was read to 4" in log_problem(TOPIC, None, None, {0: 1, 1: 4}, {0: 1})


def test_a_deleted_topic_the_stream_has_read_is_refused_but_a_fresh_stream_may_wait_for_its_topic():
    assert log_problem(TOPIC, "id-a", None, {}, {}) == "topic shop.events, which the stream has read, no longer exists"
    assert log_problem(TOPIC, None, None, {0: 3}, {}).endswith("no longer exists")
    assert log_problem(TOPIC, None, None, {}, {}) == ""


def test_the_refusal_is_one_line_that_names_the_checkpoint_and_the_way_out(tmp_path):
    message = str(refusal("topic t was recreated", tmp_path / "cp"))
    assert "\n" not in message and str(tmp_path / "cp") in message
    assert "kappa stream --reset --yes" in message and message.endswith("docs/runbook.md#stream-rewound)")


def test_the_checkpoints_that_read_a_topic_are_found_by_their_recorded_source(tmp_path):
    record_source(tmp_path / "marketplace", TOPIC, "id-a")
    record_source(tmp_path / "marketplace__g2", TOPIC, "id-a")
    record_source(tmp_path / "sensors", "sensor.readings", "id-s")
    (tmp_path / "legacy").mkdir()
    assert recorded_source(tmp_path / "marketplace") == {"topic": TOPIC, "topic_id": "id-a"}
    assert recorded_source(tmp_path / "legacy") is None
    assert checkpoints_reading(tmp_path, TOPIC) == [tmp_path / "marketplace", tmp_path / "marketplace__g2"]
    assert checkpoints_reading(tmp_path / "absent", TOPIC) == []
