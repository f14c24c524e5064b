# optional simulator, installed only where that bridge runs; its API is Any here.
from typing import Any

def __getattr__(name: str) -> Any: ...
