"""The analytic cost model: memory, prefill, decode step and serving dynamics, over arrays of candidates.

Pure numpy: no web framework or database here. A candidate is one (model, GPU, weight dtype, KV dtype,
engine, parallel layout, engine settings, workload); a batch of candidates is a struct of equal-length
arrays (``Candidates``), scored in one pass by ``evaluate``. Catalog facts are gathered once into
``Tables`` (one row per model, GPU, dtype), and candidates hold integer indices into them.

Units are in the names: ``_s`` seconds, ``_bytes`` bytes, ``_flops`` floating-point operations
(a multiply-add counts 2), ``_tok`` tokens. Times are per replica unless the name says otherwise.

The physics (each term is a roofline over the catalog's datasheet figures, scaled by fitted efficiencies):

* Memory per GPU: weights (bits per weight from the dtype, scales included; embeddings in 16 bits; split
  over TP x PP, experts included), activations of one forward pass of ``max_num_batched_tokens`` tokens
  plus FP32 sampling logits, a fixed reserve (CUDA context, graphs, workspaces) and NCCL buffers. The KV
  budget follows the engine: a share of total memory (vLLM) or of what is free (TensorRT-LLM).
* KV per token and GPU: 2 x layers/PP x ceil(KV heads / TP) x head dim x bytes; MLA latents are not
  split by TP; sliding-window layers hold at most the window.
* Prefill: linear FLOPs of the active parameters plus the causal attention term (quadratic in the
  prompt), over dense FLOPS x ``eff_flops``, floored by reading the weights once; two ring all-reduces
  per layer under TP (one where attention and MLP run in parallel and their sum is reduced once).
* Decode step: (weights touched + KV read for every sequence) over bandwidth x ``eff_bw`` against the
  batch's FLOPs over compute, smoothly whichever binds, plus all-reduces and a software overhead per step
  and per layer. MoE layers read only the experts the batch routes to (expected distinct experts of ``b``
  tokens).
* Serving (continuous batching): with ``B`` sequences decoding, each step also carries on average
  ``B x I / O`` prompt tokens (I, O: input and output lengths) of arriving requests (chunked prefill), so
  ``TPOT = t_decode(B) + B x (I/O) x c_prefill``. Closed loops solve Little's law for ``B``; open loops
  (request rate) add M/D/1 queueing to TTFT; when the load exceeds what ``max_num_seqs`` or the KV cache
  holds, requests queue and TTFT absorbs the wait. The first wave of a closed loop (all clients at once)
  is the fitted ``wave`` share of that wave's prefill queue, weighted by the workload's
  ``first_wave_share`` (clients / requests of a benchmark run; 0 in a steady state). A decoding request's
  steps carry the prompts of the other requests only: ``TPOT = t_decode(B) + B x (I/O) x c_prefill x (C-1)/C``
  in a closed loop of C clients.

``step_model`` gathers the step-time terms of each candidate (``StepModel``: a decode step at any batch and
context, the added time of prompt tokens carried by a step, a prefill on its own); the serving solve and the
scheduler simulation (simulate.py) both time steps with it.

This module is the cost model's front door: it re-exports the names callers use from the modules that hold
them, one job each:

* tables.py: the catalog as arrays (``Tables``, ``build_tables``)
* candidates.py: a batch of candidates and the fitted parameters (``Candidates``, ``Params``, modes)
* memory.py: memory, capacity and operation counts before any parameter (``Static``, ``static_terms``)
* step_model.py and step_kernels.py: step times on arrays, and on floats compiled (``StepModel``)
* serve.py, serve_kernel.py and cpu_pool.py: the serving steady state (``serve``, ``evaluate``,
  ``ServeInputs``), its compiled per-candidate solve, and the cores it is split over
"""

from service.core.candidates import (
    BUDGET_SHARE_OF_FREE,
    BUDGET_SHARE_OF_TOTAL,
    MODE_CONCURRENCY,
    MODE_OFFLINE,
    MODE_RATE,
    MODE_STATIC,
    MODES,
    PARAM_NAMES,
    Candidates,
    Params,
    take_rows,
)
from service.core.memory import ASSUMED_REQUESTS_PER_CLIENT, Capacity, Static, capacity, static_terms
from service.core.serve import Finish, ModeSplit, Result, ServeInputs, evaluate, serve, split_modes
from service.core.serve_kernel import KERNEL_INPUTS, warm_up
from service.core.step_model import StepModel, step_model
from service.core.tables import COMPUTE_DTYPES, Tables, build_tables
from service.core.types import I_, F
from service.units import GB_BYTES, GIB_BYTES, MB_BYTES

__all__ = [
    "ASSUMED_REQUESTS_PER_CLIENT", "BUDGET_SHARE_OF_FREE", "BUDGET_SHARE_OF_TOTAL", "COMPUTE_DTYPES", "GB_BYTES",
    "GIB_BYTES", "I_", "KERNEL_INPUTS", "MB_BYTES", "MODES", "MODE_CONCURRENCY", "MODE_OFFLINE", "MODE_RATE",
    "MODE_STATIC", "PARAM_NAMES", "Candidates", "Capacity", "F", "Finish", "ModeSplit", "Params", "Result",
    "ServeInputs", "Static", "StepModel", "Tables", "build_tables", "capacity", "evaluate", "serve",
    "split_modes", "static_terms", "step_model", "take_rows", "warm_up",
]
