"""Former home of the launch renderer, kept so existing imports work: see ``service.engines``."""

from service.engines.base import DEFAULT_PORT, LaunchSpec
from service.engines.errors import CheckpointError, LaunchError
from service.engines.launch import render_launch
from service.engines.trtllm import TRTLLM_EXTRA_OPTIONS_FILE
from service.engines.vocabulary import VOCAB_DIR, FlagSpec, Vocabulary, YamlKeySpec, vocabulary, warm_up

__all__ = ["DEFAULT_PORT", "TRTLLM_EXTRA_OPTIONS_FILE", "VOCAB_DIR", "CheckpointError", "FlagSpec", "LaunchError",
           "LaunchSpec", "Vocabulary", "YamlKeySpec", "render_launch", "vocabulary", "warm_up"]
