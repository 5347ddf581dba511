"""Why a deployment cannot be launched."""



class LaunchError(ValueError):
    """The deployment cannot be rendered: unknown engine version, unsupported combination, bad value."""


class CheckpointError(LaunchError):
    """No checkpoint plan for the weight dtype. The model, its ``checkpoint``, the engine version, the weight dtype
    and the KV dtype (TensorRT-LLM's quantisation step takes it) decide it, whatever the GPU, parallelism and
    settings."""
