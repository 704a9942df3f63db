"""Where a Spark driver listens and is reached: loopback by default, another address only when asked for."""

from __future__ import annotations

from spark_apps.core.settings import Settings
from spark_apps.io.spark_session import session_conf


def test_the_driver_listens_and_is_reached_where_the_settings_say(tmp_path):
    assert {k: v for k, v in session_conf(Settings(home=tmp_path)).items() if k.startswith("spark.driver.")
            and k.endswith(("host", "bindAddress"))} == {"spark.driver.host": "127.0.0.1",
                                                         "spark.driver.bindAddress": "127.0.0.1"}
    remote = Settings(home=tmp_path, allow_remote=True, spark_driver_bind_address="0.0.0.0",
                      spark_driver_host="10.0.0.5")
    assert (session_conf(remote)["spark.driver.bindAddress"], session_conf(remote)["spark.driver.host"]) == \
        ("0.0.0.0", "10.0.0.5")
