"""Channel exceptions; each message names the channel, the call and the key."""

from __future__ import annotations


class ChannelError(RuntimeError):
    """Base class of every channel failure."""


class ChannelFull(ChannelError):
    """``put_nowait`` found the key's queue at ``maxsize``."""


class ChannelEmpty(ChannelError):
    """``get_nowait`` found the key's queue empty."""


class ChannelTimeout(ChannelError, TimeoutError):
    """A blocking call waited its whole ``timeout``."""


class ChannelClosed(ChannelError):
    """The channel actor is gone (closed, or its process or node died)."""
