"""How work over the log runs: interpreted when small, generated code when large (a stand-in session)."""

from types import SimpleNamespace

from spark_apps.io.spark_session import INTERPRETED_MAX_RECORDS, choose_execution, execution_for


class _Conf(dict):
    def set(self, key, value):
        self[key] = value

    def unset(self, key):
        self.pop(key, None)


def test_a_small_micro_batch_runs_interpreted_and_a_large_one_with_generated_code():
    session = SimpleNamespace(conf=_Conf())
    choose_execution(session, 1_000)
    assert session.conf == {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    choose_execution(session, INTERPRETED_MAX_RECORDS + 1)
    assert session.conf == {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def test_work_over_a_shared_session_gives_the_session_its_own_settings_back():
    session = SimpleNamespace(conf=_Conf({"spark.sql.codegen.wholeStage": "true"}))
    with execution_for(session, 10):
        assert session.conf["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    assert session.conf == {"spark.sql.codegen.wholeStage": "true"}


def test_the_records_of_a_span_count_a_partition_new_to_it_from_offset_zero():
    from spark_apps.io.lineage import records_between

    assert records_between({0: 100, 1: 40}, {0: 250, 1: 40, 2: 7}) == 157
