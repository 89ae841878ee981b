"""SCALE-Sim 3.0 (``pip install scalesim``) as an external reference for :mod:`sim.accel.systolic`'s cycle counts.

SCALE-Sim models a layer as demand matrices, one row per cycle, built fold by fold (weight or
input preload, the streamed operand, fill/drain skew); its memory simulation then only adds stall
cycles when SRAM bandwidth runs short. :mod:`sim.accel.systolic` has no stalls, so the
like-for-like comparison is SCALE-Sim's stall-free compute cycles: the row count of its compute
unit's demand matrices. The unit is driven directly, as ``single_layer_sim.run`` does: scalesim
3.0.0's memory simulation crashes under NumPy 2 (``int()`` of a 1-element array in
``double_buffered_scratchpad_mem.service_memory_requests``), so its full run is not usable here.

SCALE-Sim convolutions have no padding field: give it the padded input size.
"""

from __future__ import annotations

from coevo.sim.errors import UserInputError


def available() -> bool:
    """Whether scalesim imports."""
    try:
        import scalesim  # noqa: F401
    except ImportError:
        return False
    return True


def scalesim_cycles(dataflow: str, rows: int, cols: int, ih: int, iw: int, kernel: int, c_in: int, c_out: int, stride: int = 1) -> int:
    """SCALE-Sim's stall-free compute cycles for one conv layer (input ``ih x iw x c_in``, ``c_out`` ``kernel x kernel`` filters).

    Raises:
        UserInputError: scalesim is not installed, or an unknown dataflow.
    """
    if dataflow not in ("ws", "os", "is"):
        raise UserInputError(f"unknown dataflow {dataflow!r}; choose ws, os or is")
    try:
        from scalesim.compute.operand_matrix import operand_matrix
        from scalesim.compute.systolic_compute_is import systolic_compute_is
        from scalesim.compute.systolic_compute_os import systolic_compute_os
        from scalesim.compute.systolic_compute_ws import systolic_compute_ws
        from scalesim.layout_utils import layouts
        from scalesim.scale_config import scale_config
        from scalesim.topology_utils import topologies
    except ImportError as exc:
        raise UserInputError("SCALE-Sim is not installed: pip install scalesim") from exc
    cfg = scale_config()
    cfg.set_arr_dims(rows, cols)
    cfg.set_dataflow(dataflow)
    cfg.force_valid()  # set in code, not read from a file
    topo = topologies()
    # entries: name, ifmap h, ifmap w, filter h, filter w, channels, filters, stride h, stride w, sparsity N, M
    topo.load_layer_params_from_list("l0", ["l0", ih, iw, kernel, kernel, c_in, c_out, stride, stride, 1, 1])
    ops = operand_matrix()
    ops.set_params(cfg, topo, layouts(), 0)
    ops.create_operand_matrices()
    unit = {"ws": systolic_compute_ws, "os": systolic_compute_os, "is": systolic_compute_is}[dataflow]()
    unit.set_params(
        config_obj=cfg,
        ifmap_op_mat=ops.get_ifmap_matrix()[1],
        filter_op_mat=ops.get_filter_matrix()[1],
        ofmap_op_mat=ops.get_ofmap_matrix()[1],
    )
    ifmap, filt, ofmap = unit.get_demand_matrices()
    if not ifmap.shape[0] == filt.shape[0] == ofmap.shape[0]:
        raise RuntimeError(f"SCALE-Sim demand matrices disagree on length: {ifmap.shape[0]}, {filt.shape[0]}, {ofmap.shape[0]}")
    return int(ofmap.shape[0])
