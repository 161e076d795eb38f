"""Number formatting shared by the widgets: one place for units, precision and "N/A"."""

from __future__ import annotations

NA = "N/A"


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    """``fmt(52.4, '%') -> '52 %'``; None -> 'N/A'."""
    if value is None:
        return NA
    text = f"{value:,.{digits}f}"
    return f"{text} {unit}".rstrip() if unit else text


def fmt_ms(value: float | None) -> str:
    """Milliseconds with precision that suits the magnitude (kernels run in us to s)."""
    if value is None:
        return NA
    if value < 1:
        return f"{value * 1000:.1f} us"
    if value < 10:
        return f"{value:.3f} ms"
    return f"{value:,.1f} ms"


def fmt_delta_pct(new: float | None, old: float | None, lower_is_better: bool = True) -> str:
    """'-12.3 % better' style change from ``old`` to ``new``; '' when either is missing."""
    if new is None or old is None or old == 0:
        return ""
    change = (new - old) / old * 100.0
    if abs(change) < 0.05:
        return "same"
    better = change < 0 if lower_is_better else change > 0
    return f"{change:+.1f} % ({'better' if better else 'worse'})"


def fmt_mib(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def fmt_kbps(value: float | None) -> str:
    """NVML reports PCIe throughput in KB/s."""
    if value is None:
        return NA
    if value >= 1e6:
        return f"{value / 1e6:.1f} GB/s"
    if value >= 1e3:
        return f"{value / 1e3:.1f} MB/s"
    return f"{value:.0f} KB/s"


def fmt_value(value: object, none: str = "-") -> str:
    """A stored value for people: None -> '-', True/False -> 'yes'/'no', a dict -> 'a=b,c=d';
    anything else as ``str``."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or none
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def fmt_shape(shape: object) -> str:
    """{'m': 8192, 'n': 2560, 'k': 2560} -> '8192x2560x2560' (the order the kernel lists them)."""
    if not isinstance(shape, dict) or not shape:
        return "-"
    return "x".join(str(v) for v in shape.values())
