"""Visual localisation, the utility LDP-Feat is judged on (LDP-Feat, ICCV 2023, section 6.2).

* :mod:`.reader` -- a benchmark in hloc's layout, read with pycolmap;
* :mod:`.map` -- the server's map: reference SIFT matched between posed references, triangulated;
* :mod:`.utility` -- the protected query features matched to the map, absolute pose, Table 2's rates;
* :mod:`.render`, :mod:`.scene` -- the SIMULATED room, written in the benchmark layout;
* :mod:`.dataset` -- the dataset plugin ``localisation``.

The utility's names are importable from here.
"""

from vispriv.plugins.descriptor_release.localisation.utility import (
    LOWER_IS_BETTER_SUFFIXES,
    PAPER_THRESHOLDS,
    LocalisationImages,
    LocalisationProtocol,
    absolute_pose,
    localisation_map,
    localisation_utility,
    match_to_map,
    pose_errors,
    summarise,
    threshold_name,
)

__all__ = [
    "LOWER_IS_BETTER_SUFFIXES",
    "PAPER_THRESHOLDS",
    "LocalisationImages",
    "LocalisationProtocol",
    "absolute_pose",
    "localisation_map",
    "localisation_utility",
    "match_to_map",
    "pose_errors",
    "summarise",
    "threshold_name",
]
