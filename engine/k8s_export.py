"""Kubernetes manifests for a fleet job, as plain dicts (YAML or JSON is the caller's choice).

A Job runs ``tui fleet-report`` once in the container image (the Containerfile: its entrypoint is
``tui``, its user uid 10001) with ``nvidia.com/gpu`` limits; ``every_node`` makes it a DaemonSet
whose pods report every ``every_s`` seconds on each matching node. A DaemonSet's pods hold their
GPUs for as long as they live: it is for a burn-in or a maintenance window, deleted afterwards.

The reports go to a hostPath folder on each node (default ``/var/lib/sol-cockpit/reports``) where a
log shipper or ``tui fleet`` reads them, or to a PersistentVolumeClaim shared by all pods. The pod
runs as uid 10001 with a read-only root filesystem, no privilege escalation and no capabilities;
the cockpit's own folders and /tmp are an emptyDir.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from engine import __version__
from engine.errors import InputError
from engine.fleet_job import FleetJob, check_name

DEFAULT_IMAGE = f"sol-cockpit:{__version__}"
"""What ``podman build -t sol-cockpit:<version> -f Containerfile .`` tags (never ``latest``)."""
DEFAULT_HOST_PATH = "/var/lib/sol-cockpit/reports"
IMAGE_UID = 10001
"""The Containerfile's unprivileged user ``sol``."""
REPORTS_MOUNT = "/reports"
SCRATCH_MOUNT = "/tmp"
LABELS = {"app.kubernetes.io/name": "sol-cockpit", "app.kubernetes.io/component": "fleet-report"}


class K8sOptions(BaseModel):
    """Where and how the fleet job runs on Kubernetes."""

    image: str = DEFAULT_IMAGE
    """The container image built from the Containerfile."""
    namespace: str | None = None
    """Namespace (None: left out, so ``kubectl -n`` or the context decides)."""
    every_node: bool = False
    """A DaemonSet (one pod per matching node) instead of one Job."""
    every_s: int = 86400
    """DaemonSet pods write a fresh report this often, in seconds."""
    host_path: str = DEFAULT_HOST_PATH
    """Node folder the reports go to (created when missing; must be writable by uid ``run_as_user``)."""
    pvc: str | None = None
    """A PersistentVolumeClaim for the reports instead of the hostPath (ReadWriteMany for a DaemonSet)."""
    run_as_user: int = IMAGE_UID
    """uid (and gid) the container runs as; never 0."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Nodes to run on, e.g. {'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3'}."""
    deadline_s: int = 1800
    """A Job's activeDeadlineSeconds: a hung bench cannot hold the GPUs for ever."""
    ttl_s: int = 86400
    """A finished Job is deleted after this many seconds (its reports stay)."""
    pull_policy: str = "IfNotPresent"
    """imagePullPolicy."""

    def validate_all(self) -> K8sOptions:
        if not self.image.strip() or any(c.isspace() for c in self.image):
            raise InputError(f"--image={self.image!r}: not an image reference",
                             fix=f"e.g. registry.example.com/sol-cockpit:{__version__}")
        if self.namespace is not None:
            check_name("--namespace", self.namespace, 63)
        if not self.host_path.startswith("/") or ".." in self.host_path.split("/"):
            raise InputError(f"--host-path={self.host_path!r}: not an absolute path",
                             fix=f"e.g. {DEFAULT_HOST_PATH}")
        if self.pvc is not None:
            check_name("--pvc", self.pvc, 253)
        if self.run_as_user <= 0:
            raise InputError(f"--run-as-user={self.run_as_user}: the job runs as a non-root user",
                             fix=f"give a uid above 0 (the image's user is {IMAGE_UID})")
        for field, value, low in (("--every", self.every_s, 60), ("--deadline", self.deadline_s, 60),
                                  ("--ttl", self.ttl_s, 0)):
            if value < low:
                raise InputError(f"{field}={value}: below {low} seconds", fix=f"give {low} seconds or more")
        if self.pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise InputError(f"--pull-policy={self.pull_policy!r}: not a pull policy",
                             fix="Always, IfNotPresent or Never")
        return self


def _container(job: FleetJob, opts: K8sOptions) -> dict[str, Any]:
    args = ["fleet-report", "--output-dir", REPORTS_MOUNT, "--host", "$(NODE_NAME)", *job.report_args()]
    if opts.every_node:
        args += ["--every", str(opts.every_s)]
    field_env = [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
                 for n, p in (("NODE_NAME", "spec.nodeName"), ("POD_NAME", "metadata.name"),
                              ("POD_NAMESPACE", "metadata.namespace"))]
    dirs = {"HOME": SCRATCH_MOUNT, "SOL_COCKPIT_CONFIG_DIR": f"{SCRATCH_MOUNT}/sol/config",
            "SOL_COCKPIT_DATA_DIR": f"{SCRATCH_MOUNT}/sol/data", "SOL_COCKPIT_CACHE_DIR": f"{SCRATCH_MOUNT}/sol/cache",
            "CUPY_CACHE_DIR": f"{SCRATCH_MOUNT}/sol/cupy", "XDG_CACHE_HOME": f"{SCRATCH_MOUNT}/.cache"}
    env = field_env + [{"name": k, "value": v} for k, v in {**dirs, **job.knob_env()}.items()]
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "2Gi"}}
    if job.gpus:
        resources["limits"] = {"nvidia.com/gpu": str(job.gpus)}
    return {
        "name": "fleet-report",
        "image": opts.image,
        "imagePullPolicy": opts.pull_policy,
        "args": args,
        "env": env,
        "resources": resources,
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": opts.run_as_user, "runAsGroup": opts.run_as_user,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "privileged": False,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "reports", "mountPath": REPORTS_MOUNT},
                         {"name": "scratch", "mountPath": SCRATCH_MOUNT}],
    }


def pod_template(job: FleetJob, opts: K8sOptions) -> dict[str, Any]:
    reports = ({"name": "reports", "persistentVolumeClaim": {"claimName": opts.pvc}} if opts.pvc else
               {"name": "reports", "hostPath": {"path": opts.host_path, "type": "DirectoryOrCreate"}})
    spec: dict[str, Any] = {
        "restartPolicy": "Always" if opts.every_node else "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": opts.run_as_user, "runAsGroup": opts.run_as_user,
                            "fsGroup": opts.run_as_user, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(job, opts)],
        "volumes": [reports, {"name": "scratch", "emptyDir": {}}],
    }
    if job.gpus:  # GPU nodes are commonly tainted so that only GPU pods land there
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if opts.node_selector:
        spec["nodeSelector"] = dict(opts.node_selector)
    return {"metadata": {"labels": {**LABELS, "sol-cockpit/job": job.name}}, "spec": spec}


def _metadata(job: FleetJob, opts: K8sOptions) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": job.name, "labels": dict(LABELS)}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    return meta


def job_manifest(job: FleetJob, opts: K8sOptions) -> dict[str, Any]:
    """A batch/v1 Job: one pod, ``job.gpus`` GPUs, one report."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _metadata(job, opts),
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": opts.deadline_s,
                     "ttlSecondsAfterFinished": opts.ttl_s, "template": pod_template(job, opts)}}


def daemonset_manifest(job: FleetJob, opts: K8sOptions) -> dict[str, Any]:
    """An apps/v1 DaemonSet: a pod on every matching node, a report every ``every_s`` seconds."""
    selector = {**LABELS, "sol-cockpit/job": job.name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _metadata(job, opts),
            "spec": {"selector": {"matchLabels": selector}, "template": pod_template(job, opts)}}


def manifests(job: FleetJob, opts: K8sOptions) -> list[dict[str, Any]]:
    """The validated job as manifests (InputError naming the first bad field)."""
    job.validate_all()
    opts.validate_all()
    return [daemonset_manifest(job, opts) if opts.every_node else job_manifest(job, opts)]


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A v1 List: what ``--json`` prints, and what ``kubectl apply -f -`` takes as JSON."""
    return {"apiVersion": "v1", "kind": "List", "items": items}


def to_yaml(items: list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(items, sort_keys=False, default_flow_style=False)
