"""TRANSITIONAL SHIM (delete when merged): the old import path of the recommender.

The code lives in service/recommendation/ (Recommender: service/recommendation/answer.py). Kept only so that
branches written against the old path still import until their imports move.
"""

from service.recommendation.answer import Recommender
from service.recommendation.scenarios import apply_scenario

__all__ = ["Recommender", "apply_scenario"]
