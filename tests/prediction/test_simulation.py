"""The scheduler simulation of one deployment for the API: a request's simulations shared only where every
input is the same, and the cases it leaves analytic."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.core.costmodel import Params, static_terms
from service.prediction.simulation import MAX_SIM_CLIENTS_PER_REPLICA, SimMemo, simulate_deployment, skip_reason
from service.schemas.predictions import Deployment, SimulationOptions, Workload
from tests.core.support import PARAMS, TABLES, cand


def test_a_requests_simulations_are_shared_only_where_every_input_is_the_same() -> None:
    # the recommender passes one memo through a request's predictions: candidates that differ only where
    # the step model does not (the deployment's name for its weights, say) share one run; any other
    # difference (a static term, the parameters, the load per replica, the engine's scheduler) runs again
    wl = Workload(input_tokens=1024, output_tokens=256, concurrency=16)
    opts = SimulationOptions(requests=300)

    def dep(**kw: Any) -> Deployment:
        return Deployment(**{"gpu": "h100-sxm", "weight_dtype": "bf16", "engine": "vllm", **kw})

    def static(**kw: Any) -> Any:
        return static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm", isl=1024, osl=256, **kw))

    memo: SimMemo = {}
    first = simulate_deployment(static(), PARAMS, dep(), wl, opts, memo)
    again = simulate_deployment(static(), PARAMS, dep(weight_dtype="fp8"), wl, opts, memo)
    assert again.result is first.result and len(memo) == 1
    slower = Params(**{**vars(PARAMS), "step_overhead_s": np.asarray(PARAMS.step_overhead_s) * 2.0})
    others = [(static(kv="fp8"), PARAMS, dep(kv_dtype="fp8")), (static(), slower, dep()),
              (static(replicas=2), PARAMS, dep(replicas=2)), (static(), PARAMS, dep(engine="trtllm"))]
    for st_, params, d in others:
        got = simulate_deployment(st_, params, d, wl, opts, memo)
        assert got.result is not first.result
        assert got.result == simulate_deployment(st_, params, d, wl, opts).result     # as without the memo
    assert len(memo) == 1 + len(others)


def test_more_clients_per_replica_than_a_simulation_takes_stay_analytic() -> None:
    dep = Deployment(gpu="h100-sxm", weight_dtype="bf16", engine="vllm", replicas=2, gpu_count=2)
    most = MAX_SIM_CLIENTS_PER_REPLICA
    assert skip_reason(dep, Workload(input_tokens=128, output_tokens=64, concurrency=2 * most)) is None
    reason = skip_reason(dep, Workload(input_tokens=128, output_tokens=64, concurrency=2 * most + 1))
    assert reason is not None and str(most + 1) in reason
    assert skip_reason(dep, Workload(input_tokens=128, output_tokens=64, request_rate=1e6)) is None
