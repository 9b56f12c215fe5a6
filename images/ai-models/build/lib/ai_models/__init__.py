"""Runtime of the ai-models Deckhouse module."""

from importlib import metadata

__version__ = metadata.version("ai-models")
