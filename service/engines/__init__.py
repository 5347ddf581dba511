"""Serving engines as a family: each engine module (``vllm``, ``trtllm``) reads its own defaults from its flag
vocabulary and renders its own launch; ``registry`` finds one by catalog engine id.

``vocabulary`` (flags and YAML keys per engine version), ``defaults`` (what an engine does when a setting is
left out), ``checkpoints`` with the quantisation tools ``llm_compressor`` and ``modelopt``, ``container``
(image, `docker run`, packing onto nodes) and ``launch`` (``render_launch``, the dispatcher) serve them all.
"""
