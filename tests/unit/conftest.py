"""The unit tier needs no JVM, jars or server (`make unit`): a unit test that asks for the session's Spark, broker,
catalog or S3 server fails at once and says where it belongs."""

import pytest


def _refuse(what: str):
    pytest.fail(f"a unit test needs no {what}; a test that does belongs under tests/integration", pytrace=False)


@pytest.fixture(scope="session")
def spark():
    _refuse("SparkSession")


@pytest.fixture(scope="session")
def kafka_broker():
    _refuse("Kafka broker")


@pytest.fixture(scope="session")
def catalog_database():
    _refuse("catalog database")


@pytest.fixture(scope="session")
def object_store():
    _refuse("S3-compatible server")
