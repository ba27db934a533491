"""Real-model instance suite: next-token distributions of SmolLM2-135M.

``load.load_smollm2`` reads the shipped ``instances/data/smollm2.npz`` with numpy
only; ``generate`` regenerates it (needs the ``[llm]`` extra).
"""
