"""Array type aliases of the compute core (one owner)."""

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]
I_ = NDArray[np.int64]
B_ = NDArray[np.bool_]
