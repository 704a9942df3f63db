"""A Spark driver's JVM prints some things itself, outside log4j (a warning on every start, an uncaught exception's
stack): it is started with its standard error on the home's Spark log, and the command's own is given back."""

from __future__ import annotations

import subprocess
import sys

from spark_apps.io.spark_session import _jvm_output_to


def test_a_process_started_meanwhile_writes_its_standard_error_to_the_log_and_the_commands_own_comes_back(
        tmp_path, capfd):
    log = tmp_path / "spark.log"
    with _jvm_output_to(log):
        subprocess.run([sys.executable, "-c", "import sys; print('WARNING: from the JVM', file=sys.stderr)"],
                       check=True)
    subprocess.run([sys.executable, "-c", "import sys; print('the command speaks', file=sys.stderr)"], check=True)
    assert log.read_text() == "WARNING: from the JVM\n"
    assert capfd.readouterr().err == "the command speaks\n"


def test_an_error_spark_raised_names_the_spark_log_and_any_other_does_not(tmp_path):
    from spark_apps.cli import _spark_log_named
    from spark_apps.core.errors import PlatformError
    from spark_apps.core.settings import Settings

    settings = Settings(home=tmp_path)
    java_error = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    try:
        try:
            raise java_error("An error occurred while calling o91.save")
        except java_error:
            raise PlatformError("writing gold.x failed") from None
    except PlatformError as from_spark:
        assert _spark_log_named(settings, from_spark) == f" (Spark's log: {tmp_path / 'logs' / 'spark.log'})"
    assert _spark_log_named(settings, PlatformError("--version needs --table")) == ""
