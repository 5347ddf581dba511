"""LLM Deploy Advisor: the REST service and its compute core."""
