"""An exception said in one line for a log: its message's first line, or its class when it has no message."""

from spark_apps.core.errors import first_line


def test_an_error_is_its_messages_first_line_without_the_stack_trace_after_it():
    error = RuntimeError("  [DELTA_CONCURRENT_APPEND] files were added\n\tat org.apache.spark.sql.delta.Foo(Foo.scala)")
    assert first_line(error) == "[DELTA_CONCURRENT_APPEND] files were added"


def test_an_error_without_a_message_is_named_by_its_class():
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(ValueError("  \n ")) == "ValueError"
