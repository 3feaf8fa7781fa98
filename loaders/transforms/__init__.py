"""Transforms declared in a read plan, applied identically by the reader and by ``run.batch``."""

from .base import Context, Transform, registered, transform_from_json
from .media import RandomResizedCrop, SampleFrames
from .pack import Pack, PackedSequence, pack_block
from .text import ChatTemplate, Tokenize, UseTokens
from .user import UserFunction

__all__ = [
    "ChatTemplate",
    "Context",
    "Pack",
    "PackedSequence",
    "RandomResizedCrop",
    "SampleFrames",
    "Tokenize",
    "Transform",
    "UseTokens",
    "UserFunction",
    "pack_block",
    "registered",
    "transform_from_json",
]
