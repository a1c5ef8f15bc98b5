"""Calibrate the cost model's efficiency factors from measured serving results.

A roofline with guessed efficiency factors is tens of percent off real engines.
This package turns measurements into fitted factors and says how far the
predictions are from what was measured. One module a job, in pipeline order:

* ``measurements`` — :class:`Measurement`, one measured point: a serving run
  (prompt/output tokens, concurrency or request rate, and the measured output
  tokens/s, mean TTFT, mean TPOT) or a kernel timing (one transformer layer's
  linear layers on ``tokens`` tokens, as a profiler reports them); and the
  deterministic fit / holdout split (:func:`assign_splits`);
* ``predict`` — :func:`predict`, the cost model's prediction for a point
  (:func:`planner.capacity.replica_capacity` for serving runs,
  :func:`kernel_layer_ms` for kernels);
* ``parsers`` — ``vllm bench serve --save-result`` JSON, genai-perf / AIPerf
  profile exports, a plain CSV (:data:`CSV_COLUMNS`) and fleetplan's own JSON
  (``{"measurements": [...]}``); every problem is reported with its file, line
  and reason (:class:`MeasurementError`), and a file with any problem is refused
  whole;
* ``fit`` — :func:`fit_calibration`, least squares (``scipy.optimize.least_squares``)
  over (prefill MFU, decode MBU, per-step overhead) per (GPU, dtype[, engine]),
  minimizing the log-ratio residuals ``ln(predicted / measured)`` of every
  measured quantity (a symmetric relative error; soft-L1 loss, so a few points
  the model cannot represent do not dominate) with a weak pull toward the
  catalog's factors; factors the data do not determine are held at the
  catalog's value; the result is a :class:`Calibration`, a named set of fitted
  factors;
* ``apply`` — :func:`apply_calibration` returns a catalog whose GPUs carry the
  factors (per dtype), with a new content hash;
* ``store`` — the YAML store of calibrations (``DIR/NAME.yaml``, default
  ``./calibrations``; the service also keeps them in its database).

Errors are absolute percentage errors ``|predicted / measured - 1|`` (APE). Every
public name is importable from ``planner.calibration`` itself.
"""

from planner.calibration.apply import apply_calibration, group_sigma_log, group_spreads
from planner.calibration.fit import (
    GRID,
    LOSS,
    LOSS_SCALE,
    LOWER,
    MAD_TO_SIGMA,
    MAX_OVERHEAD_STD_ERROR_MS,
    MAX_REL_STD_ERROR,
    MIN_SIGMA_LOG,
    MISSING_PENALTY,
    NAME_PATTERN,
    OVERHEAD_SCALE_MS,
    PARAMS,
    PRIOR_WEIGHT,
    UNCALIBRATED_DEFAULTS,
    UPPER,
    Calibration,
    GroupFit,
    GroupKey,
    Residual,
    Spreads,
    allowed_misses,
    capacity_log_error,
    fit_calibration,
    fit_group,
    group_key,
    group_measurements,
    leave_one_out,
    residual_sigma_log,
    residual_spreads,
    sigma_from_log_errors,
    source_weights,
    spreads_from_log_errors,
)
from planner.calibration.fit import _GroupResult as _GroupResult
from planner.calibration.fit import _prior as _prior
from planner.calibration.fit import _Problem as _Problem
from planner.calibration.measurements import (
    HOLDOUT_SHARE,
    MIN_POINTS_FOR_HOLDOUT,
    QUANTITIES,
    Measurement,
    MeasurementError,
    MeasurementKind,
    Split,
    assign_splits,
    fit_points,
    holdout_points,
    split_rank,
)
from planner.calibration.parsers import (
    CSV_COLUMNS,
    CSV_OPTIONAL,
    REFERENCE_PATH,
    check_measurement,
    load_measurements,
    load_reference_measurements,
    measurement_error,
    parse_csv,
    parse_json,
    resolve_model,
    validation_reason,
)
from planner.calibration.parsers import _array_entry_lines as _array_entry_lines
from planner.calibration.predict import (
    Prediction,
    ape,
    base_replica,
    kernel_layer_ms,
    measurement_engine,
    predict,
    predict_with,
    prefill_replica,
    unscaled_catalog,
    with_factors,
    with_measured_ratios,
)
from planner.calibration.store import (
    DEFAULT_CALIBRATION_DIR,
    calibration_dir,
    calibration_to_dict,
    check_name,
    list_calibration_names,
    load_calibration,
    parse_calibration,
    save_calibration,
)

__all__ = [
    "CSV_COLUMNS",
    "CSV_OPTIONAL",
    "DEFAULT_CALIBRATION_DIR",
    "GRID",
    "HOLDOUT_SHARE",
    "LOSS",
    "LOSS_SCALE",
    "LOWER",
    "MAD_TO_SIGMA",
    "MAX_OVERHEAD_STD_ERROR_MS",
    "MAX_REL_STD_ERROR",
    "MIN_POINTS_FOR_HOLDOUT",
    "MIN_SIGMA_LOG",
    "MISSING_PENALTY",
    "NAME_PATTERN",
    "OVERHEAD_SCALE_MS",
    "PARAMS",
    "PRIOR_WEIGHT",
    "QUANTITIES",
    "REFERENCE_PATH",
    "UNCALIBRATED_DEFAULTS",
    "UPPER",
    "Calibration",
    "GroupFit",
    "GroupKey",
    "Measurement",
    "MeasurementError",
    "MeasurementKind",
    "Prediction",
    "Residual",
    "Split",
    "Spreads",
    "allowed_misses",
    "ape",
    "apply_calibration",
    "assign_splits",
    "base_replica",
    "calibration_dir",
    "calibration_to_dict",
    "capacity_log_error",
    "check_measurement",
    "check_name",
    "fit_calibration",
    "fit_group",
    "fit_points",
    "group_key",
    "group_measurements",
    "group_sigma_log",
    "group_spreads",
    "holdout_points",
    "kernel_layer_ms",
    "leave_one_out",
    "list_calibration_names",
    "load_calibration",
    "load_measurements",
    "load_reference_measurements",
    "measurement_engine",
    "measurement_error",
    "parse_calibration",
    "parse_csv",
    "parse_json",
    "predict",
    "predict_with",
    "prefill_replica",
    "residual_sigma_log",
    "residual_spreads",
    "resolve_model",
    "save_calibration",
    "sigma_from_log_errors",
    "source_weights",
    "split_rank",
    "spreads_from_log_errors",
    "unscaled_catalog",
    "validation_reason",
    "with_factors",
    "with_measured_ratios",
]
