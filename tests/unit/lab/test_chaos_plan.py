"""The chaos lab's own choices, checked without a broker or Spark."""

from spark_apps.lab.chaos import DISK_FULL_STAGES, SCENARIOS
from spark_apps.lab.scenario import SCENARIO_NAMES
from spark_apps.stream.faults import STAGES


def test_a_full_disk_is_drawn_only_before_the_batch_commits_to_the_store():
    assert set(DISK_FULL_STAGES) <= set(STAGES)
    assert DISK_FULL_STAGES == ("after_parse",), "after the store's one commit the batch is published"


def test_every_scenario_a_plan_may_name_is_one_the_lab_runs():
    assert tuple(SCENARIOS) == SCENARIO_NAMES


def test_a_lab_in_a_home_of_its_own_signs_with_the_key_the_embedded_object_store_generated(tmp_path):
    from spark_apps.core.settings import S3_CREDENTIALS_FILE, Settings
    from spark_apps.lab.chaos import moved_home

    session = Settings(home=tmp_path / "session", s3_endpoint="http://127.0.0.1:9878",
                       warehouse_dir="s3a://lake/warehouse", checkpoint_root="s3a://lake/checkpoints")
    session.s3_dir.mkdir(parents=True)
    (session.s3_dir / S3_CREDENTIALS_FILE).write_text("generated-secret\n")
    lab = session.with_overrides(**moved_home(session, tmp_path / "labs" / "kill_stream"))
    assert lab.log_dir == tmp_path / "labs" / "kill_stream" / "logs", "the lab's own files move"
    assert lab.object_store_access().secret_key() == "generated-secret"
    assert lab.warehouse_dir.access.secret_key() == "generated-secret"
