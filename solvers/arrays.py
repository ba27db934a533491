"""The array type aliases every layer of otlp shares: one name for each dtype an
otlp array has, so that a signature says what it holds (``FloatArray`` for a law or a
plan, ``IntArray`` for token ids and positions, ``BoolArray`` for masks such as H*)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
