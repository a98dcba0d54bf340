"""The project's own byte-level BPE tokenizer, read through tiktoken from a primed cache."""

from refengine.tokenizer.encoding import TokenizerCacheError, cache_path, get_encoding
from refengine.tokenizer.spec import EncodingSpec, load_specs

__all__ = ["EncodingSpec", "TokenizerCacheError", "cache_path", "get_encoding", "load_specs"]
