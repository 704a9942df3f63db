"""The one line a failed query leaves for on-call, from messages shaped like Spark's real ones."""

from __future__ import annotations

from spark_apps.stream.failures import failure_summary, root_cause

PROXY = ("[STREAM_FAILED] Query [id = 48fb, runId = 0b54] terminated with exception: "
         "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. "
         "Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
         '  File "/venv/pyspark/sql/utils.py", line 163, in call\n'
         "    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)\n")

REAL_FULL_DISK = PROXY + (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o91.save.\n"
    ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/var/warehouse/bronze.db/events. SQLSTATE: 58030\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError\n"
    "Caused by: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/var/warehouse/bronze.db/events. SQLSTATE: 58030\n"
    "Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device\n"
    "\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write(RawLocalFileSystem.java:366)\n"
    "Caused by: java.io.IOException: No space left on device\n"
    "\t... 34 more\n\n"
    "=== Streaming Query ===\nIdentifier: [id = 48fb, runId = 0b54]\nCurrent State: ACTIVE\nThread State: RUNNABLE\n")


def python_error(line: str) -> str:
    return PROXY + line + "\n\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n" \
        "Caused by: py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: x\n" \
        "Identifier: [id = 48fb, runId = 0b54]\nCurrent State: ACTIVE\n"


def test_a_real_full_disk_is_named_in_words_with_the_table_and_what_to_do():
    summary = failure_summary(REAL_FULL_DISK)
    assert summary.startswith("the disk is full (java.io.IOException: No space left on device) "
                              "while writing /var/warehouse/bronze.db/events;")
    assert "start the stream again, it redoes that batch exactly once" in summary
    assert "\n" not in summary


def test_the_root_cause_is_the_innermost_java_cause_not_the_py4j_wrapper():
    assert root_cause(REAL_FULL_DISK) == "java.io.IOException: No space left on device"


def test_a_python_builtin_error_raised_in_the_batch_is_the_cause():
    detail = python_error("OSError: [Errno 28] No space left on device: 'injected after_bronze in batch 3'")
    assert root_cause(detail) == "OSError: [Errno 28] No space left on device: 'injected after_bronze in batch 3'"
    assert failure_summary(detail).startswith("the disk is full (OSError")


def test_a_platform_error_raised_in_the_batch_is_named_by_its_dotted_class():
    detail = python_error("spark_apps.stream.job.CheckpointMismatch: the checkpoint is behind the tables")
    assert failure_summary(detail) == \
        "the streaming query failed: spark_apps.stream.job.CheckpointMismatch: the checkpoint is behind the tables"


def test_a_message_without_any_exception_line_keeps_its_first_line():
    assert failure_summary("query stopped\nmore") == "the streaming query failed: query stopped"
    assert failure_summary("") == "the streaming query failed: unknown error"


def test_an_indented_cause_of_a_suppressed_exception_does_not_hide_the_main_chain():
    detail = REAL_FULL_DISK + "\tSuppressed: java.lang.IllegalStateException: close failed\n" \
        "\t\tCaused by: java.lang.IllegalStateException: stream closed\n"
    assert root_cause(detail) == "java.io.IOException: No space left on device"


def test_an_exception_without_a_message_is_still_the_cause():
    detail = python_error("py4j.protocol.Py4JJavaError: An error occurred while calling o7.save.") \
        + "Caused by: java.lang.NullPointerException\n\tat org.example.Writer.write(Writer.java:1)\n"
    assert root_cause(detail) == "java.lang.NullPointerException"
