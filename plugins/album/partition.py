"""Adaptive equal-count partition of the globe into cells (section 5, after PlaNet).

The paper partitions the globe into contiguous cells holding equal numbers of training
photos. PlaNet splits S2 cells; here the cells are latitude/longitude rectangles split
recursively at the median photo, always splitting the cell with the most photos along
its longer side (longitude lengths scaled by cos(latitude)). With ``n_cells`` a power of
two the counts are equal up to one photo; otherwise they differ by at most a factor of 2.
The rectangles tile the globe, so every coordinate falls in exactly one cell.
"""

from __future__ import annotations

import heapq

import numpy as np

from vispriv.harness.errors import InputError


def valid_coordinates(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Rows with a finite latitude in [-90, 90] and longitude in [-180, 180]."""
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    return np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180)


def partition(lat: np.ndarray, lon: np.ndarray, n_cells: int) -> np.ndarray:
    """Cells as rows (lat_min, lat_max, lon_min, lon_max) holding about equal photo counts."""
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    if not np.all(valid_coordinates(lat, lon)):
        raise InputError("coordinates must be finite, latitude in [-90, 90], longitude in [-180, 180]")
    if n_cells < 1 or n_cells > len(lat):
        raise InputError(f"cannot partition {len(lat)} photos into {n_cells} cells; need 1 <= cells <= photos")
    heap = [(-len(lat), 0, (-90.0, 90.0, -180.0, 180.0), np.arange(len(lat)))]
    counter = 1
    while len(heap) < n_cells:
        _neg, _, box, idx = heapq.heappop(heap)
        la0, la1, lo0, lo1 = box
        mid_lat = np.cos(np.radians(0.5 * (la0 + la1)))
        by_lat = (la1 - la0) >= (lo1 - lo0) * mid_lat
        values = lat[idx] if by_lat else lon[idx]
        order = idx[np.argsort(values, kind="stable")]
        half = len(order) // 2
        cut = 0.5 * (values.min() + values.max()) if half == 0 else 0.5 * (
            (lat if by_lat else lon)[order[half - 1]] + (lat if by_lat else lon)[order[half]]
        )
        left, right = order[:half], order[half:]
        if by_lat:
            boxes = ((la0, cut, lo0, lo1), (cut, la1, lo0, lo1))
        else:
            boxes = ((la0, la1, lo0, cut), (la0, la1, cut, lo1))
        for b, part in zip(boxes, (left, right)):
            heapq.heappush(heap, (-len(part), counter, b, part))
            counter += 1
    boxes = [item[2] for item in sorted(heap, key=lambda item: item[1])]
    return np.array(boxes, dtype=np.float64)


def assign(bounds: np.ndarray, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """The cell index of each coordinate (half-open boxes; the north pole and 180° close)."""
    lat = np.asarray(lat, dtype=np.float64)[:, None]
    lon = np.asarray(lon, dtype=np.float64)[:, None]
    la0, la1, lo0, lo1 = (bounds[None, :, c] for c in range(4))
    inside = (lat >= la0) & ((lat < la1) | (la1 >= 90)) & (lon >= lo0) & ((lon < lo1) | (lo1 >= 180))
    if not np.all(inside.any(axis=1)):
        raise InputError("a coordinate falls outside every cell; coordinates must be valid degrees")
    return np.argmax(inside, axis=1)
