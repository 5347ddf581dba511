"""Former home of the engine defaults, kept so existing imports work: see ``service.engines.defaults``."""

from service.engines.defaults import EngineDefaults, is_current, resolve
from service.engines.vocabulary import known_versions, read_engine_file, version_tuple, vocab_version_for

__all__ = ["EngineDefaults", "is_current", "known_versions", "read_engine_file", "resolve", "version_tuple",
           "vocab_version_for"]
