"""A batch of candidate deployments x workloads as equal-length arrays, and the fitted efficiencies they are
scored under."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.types import I_, F

MODE_OFFLINE, MODE_CONCURRENCY, MODE_RATE, MODE_STATIC = 0, 1, 2, 3
MODES = {"offline": MODE_OFFLINE, "concurrency": MODE_CONCURRENCY, "request_rate": MODE_RATE,
         "static_batch": MODE_STATIC}

BUDGET_SHARE_OF_TOTAL, BUDGET_SHARE_OF_FREE = 0, 1

PARAM_NAMES = ("eff_flops", "eff_bw", "step_overhead_s", "ttft_fixed_s", "comm_eff", "allreduce_latency_s", "wave",
               "moe_layer_prefill_s", "layer_overhead_s", "a2a_latency_s")


@dataclass
class Candidates:
    """Equal-length arrays, one entry per candidate deployment x workload."""

    model: I_
    gpu: I_
    wdtype: I_
    kvdtype: I_
    budget: I_                  # BUDGET_SHARE_OF_TOTAL | BUDGET_SHARE_OF_FREE
    tp: F
    pp: F
    ep: F                       # expert-parallel degree (routed experts split over max(tp, ep) GPUs)
    replicas: F
    max_num_seqs: F
    max_batched_tok: F
    mem_fraction: F             # vLLM gpu_memory_utilization, or TensorRT-LLM kv free fraction
    # 1 where the engine admits a request only when KV for its whole prompt + output fits (TensorRT-LLM's
    # GUARANTEED_NO_EVICT), 0 where it allocates KV as tokens are computed (vLLM): what the batch is capped by
    reserve_full: F
    input_tok: F
    output_tok: F
    mode: I_
    load: F                     # concurrency (clients, whole deployment), request rate (req/s), or batch size
    context_tok: F              # longest sequence the deployment must hold (max_model_len)
    # closed loop: share of the measured requests sent in the first wave (every client at once): clients /
    # requests of a benchmark run, 0 in a steady state (the default of a prediction)
    first_wave_share: F
    # attention data-parallel ranks per replica (each its own batch and KV cache, the experts shared); None: 1
    dp: F | None = None

    def __post_init__(self) -> None:
        if self.dp is None:
            self.dp = np.ones(len(self.tp))

    @property
    def dp_ranks(self) -> F:
        """``dp`` as an array (1 where none was given): __post_init__ fills it, the field's type cannot say so."""
        return self.dp if self.dp is not None else np.ones(len(self.tp))

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, idx: NDArray[Any]) -> Candidates:
        return Candidates(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass
class Params:
    """Fitted efficiencies, one value per candidate (or scalars that broadcast)."""

    eff_flops: F
    eff_bw: F
    step_overhead_s: F
    ttft_fixed_s: F
    comm_eff: F
    allreduce_latency_s: F
    wave: F
    moe_layer_prefill_s: F
    layer_overhead_s: F
    a2a_latency_s: F

    @classmethod
    def from_matrix(cls, m: F) -> Params:
        """``m`` has one column per PARAM_NAMES entry."""
        return cls(*(m[..., i] for i in range(len(PARAM_NAMES))))


def take_rows(obj: Any, idx: NDArray[np.int64]) -> Any:
    """The same dataclass with every per-candidate array indexed by ``idx``."""
    return type(obj)(**{f.name: (v[idx] if isinstance(v := getattr(obj, f.name), np.ndarray) and v.ndim else v)
                        for f in fields(obj)})
