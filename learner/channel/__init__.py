"""Named FIFO channels between worker groups (see :mod:`learner.channel.channel`)."""

from learner.channel.channel import DEFAULT_KEY, Channel
from learner.channel.errors import (
    ChannelClosed,
    ChannelEmpty,
    ChannelError,
    ChannelFull,
    ChannelTimeout,
)

__all__ = [
    "Channel",
    "ChannelClosed",
    "ChannelEmpty",
    "ChannelError",
    "ChannelFull",
    "ChannelTimeout",
    "DEFAULT_KEY",
]
