"""Cluster ids the KRaft storage tool accepts."""

import uuid

from spark_apps.services import broker


def test_a_cluster_id_never_starts_with_a_dash_the_storage_tool_would_read_as_an_option(monkeypatch):
    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # base64url "-w…"
    draws = iter([dash_first, uuid.UUID(int=1)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    cluster_id = broker.new_cluster_id()
    assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_cluster_ids_are_22_base64url_characters():
    ids = {broker.new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)
