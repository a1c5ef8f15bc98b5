import pytest

from catalog.loader import CatalogError, load_catalog, parse_entry


def test_shipped_catalog_loads_with_hash():
    cat = load_catalog()
    assert cat.content_hash.startswith("sha256:")
    assert "h100-sxm5-80gb" in cat.gpus


def test_parse_entry_rejects_unknown_kind_and_non_mapping():
    with pytest.raises(CatalogError, match="unknown catalog kind"):
        parse_entry("accelerators", {}, "x.yaml")
    with pytest.raises(CatalogError, match=r"x\.yaml: expected a mapping, got list"):
        parse_entry("gpus", ["h100"], "x.yaml")


def test_shipped_catalog_is_cached_and_complete():
    cat = load_catalog()
    assert load_catalog() is cat
    assert len(cat.gpus) == 17 and len(cat.models) == 11
    assert len(cat.workloads) >= 6
