"""One deployment's prediction, the same for POST /v1/predictions and for each deployment a recommendation offers.

``predict_deployment`` takes a resolved model and a deployment that is known to run, with its settings, its
analytic terms and its launch: the endpoint makes them from the request (``predict``); the recommender has them
from its search and passes them down, so nothing is resolved, checked or rendered twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_catalog.schema import ModelSpec
from service.prediction.analytic import Analysed, analyse
from service.prediction.launch_settings import launch, settings_for
from service.prediction.levers import prefix_tier_note
from service.prediction.response import response
from service.prediction.simulation import SimMemo, simulate_deployment, skip_reason
from service.prediction.validate import check_runnable, model_for
from service.schemas.predictions import (
    Deployment,
    Launch,
    PredictionRequest,
    PredictionResponse,
    ResolvedSettings,
    SimulationOptions,
    Workload,
)

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor


def predict_deployment(adv: Advisor, model: ModelSpec, dep: Deployment, wl: Workload, options: SimulationOptions,
                       settings: ResolvedSettings, terms: Analysed, launch_of: Launch | None,
                       sims: SimMemo | None) -> PredictionResponse:
    """``dep`` (checked: ``check_runnable``) under ``wl``: simulated when it fits and ``options`` allow, else
    analytic. ``terms``: its analytic terms (``analyse``); ``launch_of``: its launch (used when it fits);
    ``sims``: the simulations already run for the same request (one with the same inputs is not run again)."""
    static, params, res, key = terms
    fits = bool(res.fits[0])
    skip = skip_reason(dep, wl)
    sim = (simulate_deployment(static, params, dep, wl, options, sims)
           if fits and options.enabled and skip is None else None)
    out = response(adv, model, dep, wl, adv.gpus[dep.gpu], settings, res, params, key, sim,
                   launch_of if fits else None)
    if skip and out.fits and options.enabled:
        out.notes.append(skip)
    if out.fits and (tier_note := prefix_tier_note(static, params)) is not None:
        out.notes.append(tier_note)
    return out


def predict(adv: Advisor, req: PredictionRequest) -> PredictionResponse:
    """POST /v1/predictions: the request's model resolved, its deployment checked, then ``predict_deployment``."""
    model = model_for(adv, req.model, req.model_spec)
    dep, wl = req.deployment, req.workload
    check_runnable(adv, model, dep, wl, ["deployment"])
    settings, _ = settings_for(adv, dep, adv.gpus[dep.gpu], wl)
    terms = analyse(adv, model, wl, [dep]).row(0)
    # the name the launch serves the model by: the caller's
    name = req.model or (req.model_spec.name if req.model_spec else model.id)
    launch_of = launch(adv, name, dep, settings, wl=wl, model=model) if bool(terms[2].fits[0]) else None
    return predict_deployment(adv, model, dep, wl, req.simulation, settings, terms, launch_of, None)
