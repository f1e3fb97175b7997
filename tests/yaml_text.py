"""YAML for the test corpora, read with libyaml's parser where PyYAML was built with it.

The case files are read at collection, in every pytest process (each xdist worker too):
PyYAML's pure-Python parser takes seconds over them, libyaml's C parser a tenth of that.
Both build the same safe types (the C loader uses the same constructor and resolver).
"""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, through libyaml when it is there."""
    return yaml.load(text, Loader=_LOADER)
