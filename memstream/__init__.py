"""Weight memories streamed cyclically (FINN's memstream), and the word packing they are built from."""

from memstream.memstream import MemStream, MemStreamSpec

__all__ = ["MemStream", "MemStreamSpec"]
