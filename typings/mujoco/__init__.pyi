# MuJoCo's bindings are a compiled extension pyright cannot read; its names are Any here.
from typing import Any

def __getattr__(name: str) -> Any: ...
