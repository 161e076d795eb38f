"""The Prometheus endpoint: per-GPU telemetry and the results store's latest figures on ``/metrics``.

GPU metrics take dcgm-exporter's names, units and labels (``DCGM_FI_DEV_SM_CLOCK`` in MHz,
``DCGM_FI_DEV_FB_USED`` in MiB, ... labelled ``gpu``, ``UUID``, ``device``, ``modelName``,
``pci_bus_id``, ``Hostname``), so the Grafana dashboards operators already have read them, plus
``simulated`` ("true" for the simulated device's numbers, which are never a GPU's). The cockpit's
own metrics follow Prometheus' conventions: ``sol_cockpit_`` prefix, base units (seconds, ratios
0..1). Without NVML the endpoint still serves the store's metrics, with ``sol_cockpit_nvml_up 0``.

The collector reads the telemetry sampler's latest snapshot on each scrape (the sampler polls on
its own thread, never overlapping itself) and reads the store at most once per ``interval_s``. It
binds 127.0.0.1 unless told otherwise: the figures name hosts, GPUs and kernels."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from engine.errors import InputError
from engine.tuned_knobs import tuned_here

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9401
"""dcgm-exporter's 9400 plus one: the two often run on one box."""

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "pci_bus_id", "Hostname", "simulated")
GPU_METRICS: tuple[tuple[str, str, str, float], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "SM clock frequency (in MHz).", 1.0),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", "Memory clock frequency (in MHz).", 1.0),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (in C).", 1.0),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (in W).", 1.0),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", "Power management limit (in W).", 1.0),
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util_pct", "GPU utilization (in %).", 1.0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util_pct", "Memory utilization (in %).", 1.0),
    ("DCGM_FI_DEV_FB_USED", "mem_used_mib", "Framebuffer memory used (in MiB).", 1.0),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle_mask", "Current clock event reasons (bitmask).", 1.0),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "pcie_tx_kbps", "PCIe TX throughput (in KB/s).", 1.0),
    ("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "pcie_rx_kbps", "PCIe RX throughput (in KB/s).", 1.0),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_activity_pct", "Ratio of cycles an SM has at least 1 warp assigned.", 0.01),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_pct", "Ratio of warps resident on an SM to its maximum.", 0.01),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_activity_pct", "Ratio of cycles the tensor pipes are active.", 0.01),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_bw_util_pct", "Ratio of cycles the device memory interface is active.", 0.01),
)
"""(dcgm-exporter name, ``engine.nvml.Sample`` field, help, scale to dcgm-exporter's unit)."""

RUN_LABELS = ("kernel", "shape", "dtype", "gpu", "simulated")
RUNS_SCANNED = 2000
"""Newest stored runs looked at for the latest per kernel, shape, dtype and GPU model."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _labels_of(info: Any, index: int, simulated: bool, host: str) -> dict[str, str]:
    return {"gpu": str(index), "UUID": (info.uuid if info and info.uuid else f"SIMULATED-GPU-{index}" if simulated
                                        else ""),
            "device": f"nvidia{index}", "modelName": info.name if info else ("SIMULATED GPU" if simulated else ""),
            "pci_bus_id": (info.pci_bus_id or "") if info else "", "Hostname": host,
            "simulated": "true" if simulated else "false"}


def GaugeMetricFamily(name: str, documentation: str, labels: Any = None) -> Any:  # noqa: N802 - the class it makes
    """prometheus-client's gauge family, imported when the first one is made (the CLI's parser
    imports this module; prometheus-client loads only for the command that uses it)."""
    from prometheus_client.core import GaugeMetricFamily as Family

    return Family(name, documentation, labels=labels)


Metric = Any


class CockpitCollector:
    """Everything ``/metrics`` shows, gathered on each scrape (a prometheus-client collector)."""

    def __init__(self, store: Any, sampler: Any = None, devices: dict[int, Any] | None = None,
                 interval_s: float = 5.0, simulated_model: str = "SIMULATED GPU") -> None:
        self.store = store
        self.sampler = sampler
        self.devices = devices or {}
        """GPU index -> ``engine.nvml.DeviceInfo`` (name, UUID, PCI bus id), read once."""
        self.interval_s = interval_s
        self.simulated_model = simulated_model
        self.host = socket.gethostname()
        self._cache: tuple[float, list[Metric]] | None = None
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        return []  # families depend on what the store holds: collected, not pre-registered

    def collect(self) -> Iterator[Metric]:
        yield from self._gpu_metrics()
        yield from self._store_metrics()

    # --- GPUs ---------------------------------------------------------------------------------
    def _gpu_metrics(self) -> Iterator[Metric]:
        snap = self.sampler.latest() if self.sampler is not None else None
        up = GaugeMetricFamily("sol_cockpit_nvml_up", "1 when NVML answers and sees a GPU, else 0 (no driver, "
                               "no GPU, or the simulated device).")
        up.add_metric([], 1.0 if snap is not None and snap.source == "nvml" and not snap.problem else 0.0)
        yield up
        if snap is None:
            return
        fams = {name: GaugeMetricFamily(name, text, labels=GPU_LABELS) for name, _, text, _ in GPU_METRICS}
        fb_free = GaugeMetricFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=GPU_LABELS)
        gpu_up = GaugeMetricFamily("sol_cockpit_gpu_up", "1 when the GPU answered the last poll, else 0.",
                                   labels=GPU_LABELS)
        for g in snap.gpus:
            info = self.devices.get(g.index)
            if info is None and g.simulated:
                info = _SimInfo(self.simulated_model, g.index)
            labels = _labels_of(info, g.index, g.simulated, self.host)
            values = [labels[k] for k in GPU_LABELS]
            gpu_up.add_metric(values, 1.0 if g.state == "ok" else 0.0)
            s = g.sample
            if g.state != "ok" or s is None:
                continue  # a stale sample is not today's figure
            for name, attr, _, scale in GPU_METRICS:
                v = getattr(s, attr)
                if v is not None:
                    fams[name].add_metric(values, float(v) * scale)
            if s.mem_total_mib is not None and s.mem_used_mib is not None:
                fb_free.add_metric(values, float(s.mem_total_mib) - float(s.mem_used_mib))
        yield gpu_up
        yield from (f for f in (*fams.values(), fb_free) if f.samples)

    # --- the results store ----------------------------------------------------------------------
    def _store_metrics(self) -> list[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._cache is not None and now - self._cache[0] < self.interval_s:
                return self._cache[1]
            metrics = self._read_store()
            self._cache = (now, metrics)
            return metrics

    def _read_store(self) -> list[Metric]:
        up = GaugeMetricFamily("sol_cockpit_store_up", "1 when the results store could be read, else 0.")
        try:
            metrics = self._runs() + self._baselines() + self._checks()
        except Exception as exc:  # a damaged or locked store is a state on the endpoint, not a crash
            log.warning("results store %s not read: %s", getattr(self.store, "path", "?"), exc)
            up.add_metric([], 0.0)
            return [up]
        up.add_metric([], 1.0)
        return [up, *metrics]

    def _runs(self) -> list[Metric]:
        from engine.baseline import gpu_model, shape_text

        fams = {
            "seconds": GaugeMetricFamily("sol_cockpit_last_run_seconds", "Median time per launch of the latest "
                                         "stored run, in seconds.", labels=RUN_LABELS),
            "sol": GaugeMetricFamily("sol_cockpit_last_run_sol_ratio", "Speed-of-Light fraction of the latest "
                                     "stored run (T_SOL / median, 0..1).", labels=RUN_LABELS),
            "ok": GaugeMetricFamily("sol_cockpit_last_run_ok", "1 when the latest stored run finished ok, else 0.",
                                    labels=RUN_LABELS),
            "correct": GaugeMetricFamily("sol_cockpit_last_run_correct", "1 when the latest stored run's output "
                                         "matched the reference, 0 when it did not.", labels=RUN_LABELS),
            "tuned": GaugeMetricFamily("sol_cockpit_last_run_tuned", "1 when the latest stored run used knobs "
                                       "from the tuning cache, else 0.", labels=RUN_LABELS),
            "when": GaugeMetricFamily("sol_cockpit_last_run_timestamp_seconds", "When the latest stored run "
                                      "started, in seconds since the epoch.", labels=RUN_LABELS),
        }
        seen: set[tuple[str, ...]] = set()
        for r in self.store.list(limit=RUNS_SCANNED):
            labels = (r.kernel, shape_text(r.shape), r.dtype or "", gpu_model(r.gpu_name, r.profile, r.simulated),
                      "true" if r.simulated else "false")
            if labels in seen:
                continue
            seen.add(labels)
            values = list(labels)
            fams["ok"].add_metric(values, 1.0 if r.status == "ok" else 0.0)
            if r.median_ms is not None:
                fams["seconds"].add_metric(values, r.median_ms / 1e3)
            if r.sol_pct is not None:
                fams["sol"].add_metric(values, r.sol_pct / 100.0)
            if r.correct is not None:
                fams["correct"].add_metric(values, 1.0 if r.correct else 0.0)
            res = self.store.get(r.id)
            fams["tuned"].add_metric(values, 1.0 if res is not None and tuned_here(res.knobs_from)
                                     else 0.0)
            try:
                fams["when"].add_metric(values, datetime.fromisoformat(r.created_at).timestamp())
            except ValueError:
                pass
        return list(fams.values())

    def _baselines(self) -> list[Metric]:
        from engine.baseline import Baselines, marks

        book = Baselines(self.store)
        base = GaugeMetricFamily("sol_cockpit_baseline_seconds", "The baseline's median time per launch, in "
                                 "seconds (tui baseline).", labels=RUN_LABELS)
        ratio = GaugeMetricFamily("sol_cockpit_baseline_ratio", "The latest ok run's median time over its "
                                  "baseline's (above 1: slower).", labels=RUN_LABELS)
        regr = GaugeMetricFamily("sol_cockpit_baseline_regression", "1 when the latest ok run is slower than its "
                                 "baseline by more than the tolerance, else 0.", labels=RUN_LABELS)
        table = book.table()
        if table:
            latest: dict[tuple[str, str, str, str], Any] = {}
            for r in self.store.list(limit=RUNS_SCANNED, status="ok", kind="bench"):  # a soak is no bench
                latest.setdefault(_key(r), r)
            judged = marks(self.store, list(latest.values()))
            for key, b in table.items():
                values = [*key, "true" if b.simulated else "false"]
                base.add_metric(values, b.median_ms / 1e3)
                r = latest.get(key)
                if r is not None and r.id in judged:
                    ratio.add_metric(values, judged[r.id]["ratio"])
                    regr.add_metric(values, 1.0 if judged[r.id]["regression"] else 0.0)
        return [base, ratio, regr]

    def _checks(self) -> list[Metric]:
        from engine.checklist import STATE_PREFIX, step_ids

        checks = GaugeMetricFamily("sol_cockpit_checks", "Environment checks per status in this host's last "
                                   "`tui check` (pass, warn, fail, skip).", labels=("status",))
        saved = self.store.get_state(STATE_PREFIX + "checks", default={}) or {}
        saved = saved if isinstance(saved, dict) else {}
        summary = saved.get("summary") or {}
        for status in ("pass", "warn", "fail", "skip"):
            if isinstance(summary.get(status), int):
                checks.add_metric([status], float(summary[status]))
        per_check = GaugeMetricFamily("sol_cockpit_check_status", "1 for the status each environment check had in "
                                      "this host's last `tui check` (one series per check and status).",
                                      labels=("check", "status"))
        statuses = saved.get("statuses")
        statuses = statuses if isinstance(statuses, dict) else {}
        for cid, status in sorted(statuses.items()):
            for s in ("pass", "warn", "fail", "skip"):
                per_check.add_metric([str(cid), s], 1.0 if status == s else 0.0)
        steps = GaugeMetricFamily("sol_cockpit_checklist_step_done", "1 when the operators' checklist step is "
                                  "done on this host (tui checklist), else 0.", labels=("step",))
        for sid in step_ids():
            state = self.store.get_state(STATE_PREFIX + sid, default={})
            steps.add_metric([sid], 1.0 if isinstance(state, dict) and state.get("done") else 0.0)
        return [checks, per_check, steps]


def _key(r: Any) -> tuple[str, str, str, str]:
    from engine.baseline import gpu_model, shape_text

    return (r.kernel, shape_text(r.shape), r.dtype or "", gpu_model(r.gpu_name, r.profile, r.simulated))


class _SimInfo:
    """Labels of a simulated GPU: never a real GPU's UUID or bus id."""

    def __init__(self, model: str, index: int) -> None:
        self.name, self.uuid, self.pci_bus_id = model, f"SIMULATED-GPU-{index}", ""


MAX_CONNECTIONS = 32
"""Connections served at once (a thread each); one more is closed at once. Prometheus scrapes with
one connection at a time; 2 000 half-open connections once held 2 003 threads."""
REQUEST_TIMEOUT_S = 10.0
"""Seconds a connection may last, request and answer: a slow, trickling or half-open one is shut
then (the server's loop looks every ``poll_interval``), and its thread ends."""


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them, each at most
    ``REQUEST_TIMEOUT_S`` long."""

    daemon_threads = True
    request_queue_size = 64
    """The listen backlog: a burst is accepted (and what is over the cap closed) rather than left to
    retry its SYN."""

    def server_activate(self) -> None:
        super().server_activate()
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.refused = 0
        self._active: dict[Any, float] = {}
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        with self._lock:
            self._active[request] = time.monotonic()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        with self._lock:
            if self._active.pop(request, None) is not None:
                self.slots.release()

    def service_actions(self) -> None:
        """Shut every connection older than ``REQUEST_TIMEOUT_S``: its handler's read or write
        fails at once and its thread ends."""
        now = time.monotonic()
        with self._lock:
            late = [r for r, t0 in self._active.items() if now - t0 > REQUEST_TIMEOUT_S]
        for request in late:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _QuietHandler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(REQUEST_TIMEOUT_S)  # a read or write that waits longer fails

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # timed out or reset: the connection is dropped, the thread ends
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s " + format, self.address_string(), *args)


class Exporter:
    """The HTTP server and its collector; ``start()`` binds (InputError naming the port when it
    cannot), ``stop()`` shuts the server and the sampler down."""

    def __init__(self, collector: CockpitCollector, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        from prometheus_client import make_wsgi_app
        from prometheus_client.registry import CollectorRegistry

        self.collector, self.host, self.port = collector, host, port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.app = make_wsgi_app(self.registry)
        self.server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve on a thread; returns the port (the one picked, for port 0)."""
        if not is_loopback(self.host):
            log.warning("serving /metrics on %s, not loopback: anyone who can reach port %d reads this host's "
                        "GPU, kernel and run figures; put it behind a firewall or a reverse proxy", self.host,
                        self.port)
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6}) if ":" in self.host \
            else _Server
        try:
            self.server = make_server(self.host.strip("[]"), self.port, self.app, server_class, _QuietHandler)
        except OSError as exc:
            raise bind_error(self.host, self.port, exc) from None
        self.port = int(self.server.server_address[1])
        if self.collector.sampler is not None:
            self.collector.sampler.start()
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="sol-exporter", daemon=True)
        self._thread.start()
        return self.port

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self.collector.sampler is not None:
            self.collector.sampler.stop()


def bind_error(host: str, port: int, exc: OSError) -> InputError:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return InputError(f"--port={port}: {host}:{port} is already in use",
                          fix=f"pick another port with --port (0 picks a free one), or stop what listens there "
                              f"(ss -ltnp 'sport = :{port}' shows it)")
    if exc.errno == errno.EACCES:
        return InputError(f"--port={port}: binding {host}:{port} is not permitted ({exc.strerror})",
                          fix="use a port above 1023")
    return InputError(f"--host={host}: cannot bind {host}:{port} ({exc.strerror or exc})",
                      fix="give an address of this host (127.0.0.1 by default; 0.0.0.0 for every interface)")
