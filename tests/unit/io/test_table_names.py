"""A table is named schema.name; anything else, a path in disguise above all, is one readable line."""

import pytest

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings
from spark_apps.io.catalog import table_path


def test_a_schema_dot_name_is_a_folder_of_the_warehouse(tmp_path):
    settings = Settings(home=tmp_path)
    assert table_path(settings, "gold.order_status__g2") == settings.warehouse_dir / "gold.db" / "order_status__g2"


@pytest.mark.parametrize("name", ["foo", "a.b.c", "gold.", "gold./etc/passwd", "gold.../x", "gold.my table"])
def test_a_name_that_is_not_schema_dot_name_is_refused(tmp_path, name):
    with pytest.raises(PlatformError, match="table names are schema.name"):
        table_path(Settings(home=tmp_path), name)
