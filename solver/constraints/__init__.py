"""One module per constraint family; each exposes ``define_<family>()``."""
