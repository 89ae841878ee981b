"""One saved row of an outliers CSV as the layer measure it was written from.

Its own module because both the zoo-model table (:mod:`coevo.figures.lm_outliers`) and the
training trajectory (:mod:`coevo.figures._outlier_trajectory`) read such rows, and the former
runs the latter: with the reader in either one, the two would import each other.
"""

from __future__ import annotations

from coevo.sim.prune.outliers import LayerOutliers

LAYER_FIELDS = ["layer", "channels", "tokens", "absmax", "absmax_ratio", "norm_ratio", "kurtosis", "outlier_channels"]
"""The CSV columns of one layer's measures that both outlier files share, in their order (``top_share`` came later and
sits where each file appended it)."""


def layer_from_row(row: dict[str, str]) -> LayerOutliers:
    """One saved CSV row as the layer measure it was written from."""
    return LayerOutliers(
        layer=row["layer"],
        channels=int(row["channels"]),
        tokens=int(row["tokens"]),
        absmax=float(row["absmax"]),
        absmax_ratio=float(row["absmax_ratio"]),
        norm_ratio=float(row["norm_ratio"]),
        kurtosis=float(row["kurtosis"]),
        outlier_channels=tuple(int(c) for c in row["outlier_channels"].split()),
        top_share=float(row.get("top_share") or "nan"),  # absent from data saved before it was measured
    )
