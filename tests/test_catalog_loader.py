from catalog.loader import load_catalog


def test_shipped_catalog_loads_with_hash():
    cat = load_catalog()
    assert cat.content_hash.startswith("sha256:")
    assert "h100-sxm5-80gb" in cat.gpus
