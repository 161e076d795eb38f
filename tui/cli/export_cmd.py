"""`tui export k8s|slurm`: a fleet job that runs `tui fleet-report` (the environment checks and the
seed bench on each GPU) in the container image (Kubernetes) or on the nodes (Slurm), and writes one
JSON report per host that `tui fleet` reads. The job goes to stdout, or to ``-o FILE``; ``--json``
prints it as JSON (Kubernetes: a v1 List that ``kubectl apply -f -`` takes). Exit 0, or 2 for bad
input (named, before any cluster sees it)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engine import write_atomic
from tui.cli.output import print_json


def _job_args(p: argparse.ArgumentParser) -> None:
    from engine import DType

    p.add_argument("--name", default="sol-fleet", help="job name (default %(default)s)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per host (default %(default)s; 0 only with --backend sim)")
    p.add_argument("--backend", choices=["auto", "cuda", "sim"], default="cuda",
                   help="what fleet-report benches on (default %(default)s: a node without a working GPU is "
                        "reported as such, not benched on the simulated device); sim rehearses the job")
    p.add_argument("--kernel", help="seed bench kernel (default: the fused GEMM + residual)")
    p.add_argument("--shape", help="seed bench shape, as tui bench --shape")
    p.add_argument("--dtype", choices=[d.value for d in DType], help="seed bench dtype")
    p.add_argument("--profile", help="hardware profile (default: detected on each host)")
    p.add_argument("--iterations", type=int, help="timed launches per bench")
    p.add_argument("--warmup", type=int, help="warm-up launches per bench")
    p.add_argument("--block-size", dest="block_size", help="BLOCK_SIZE in the job's environment")
    p.add_argument("--pipelining", dest="memory_pipelining", help="MEMORY_PIPELINING in the job's environment")
    p.add_argument("--no-peers", dest="peers", action="store_false", help="skip the peers (cuBLAS, PyTorch)")
    p.add_argument("--no-checks", dest="checks", action="store_false", help="skip the environment checks")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", help="another environment variable; repeatable")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--json", action="store_true", help="print JSON instead of YAML / the script")


def register(sub: argparse._SubParsersAction) -> None:
    from engine import DEFAULT_IMAGE, IMAGE_UID
    from engine import K8S_DEFAULT_HOST_PATH as DEFAULT_HOST_PATH

    p = sub.add_parser("export", help="a Kubernetes Job/DaemonSet or a Slurm script that runs the fleet report")
    kinds = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    k = kinds.add_parser("k8s", help="a Kubernetes Job (or a DaemonSet with --every-node)")
    _job_args(k)
    k.add_argument("--image", default=DEFAULT_IMAGE, help="image built from the Containerfile (default %(default)s)")
    k.add_argument("--namespace", help="namespace (default: left to kubectl)")
    k.add_argument("--every-node", action="store_true",
                   help="a DaemonSet: a pod on every matching node, reporting every --every seconds; its pods hold "
                        "their GPUs while they live, so delete it when the reports are in")
    k.add_argument("--every", type=int, default=86400, metavar="SECONDS",
                   help="DaemonSet report interval (default %(default)s)")
    k.add_argument("--host-path", default=DEFAULT_HOST_PATH,
                   help="node folder for the reports, writable by --run-as-user (default %(default)s)")
    k.add_argument("--pvc", help="a PersistentVolumeClaim for the reports instead of the node folder")
    k.add_argument("--run-as-user", type=int, default=IMAGE_UID, help="uid and gid (default %(default)s, the image's)")
    k.add_argument("--node-selector", action="append", metavar="KEY=VALUE", help="node label to match; repeatable")
    k.add_argument("--deadline", type=int, default=1800, metavar="SECONDS", help="Job activeDeadlineSeconds")
    k.add_argument("--ttl", type=int, default=86400, metavar="SECONDS", help="Job ttlSecondsAfterFinished")
    k.add_argument("--pull-policy", default="IfNotPresent", help="imagePullPolicy (default %(default)s)")
    k.set_defaults(func=run)
    s = kinds.add_parser("slurm", help="an sbatch script: --gres=gpu:N, one srun step per GPU")
    _job_args(s)
    s.add_argument("--results-dir", default="sol-fleet-reports",
                   help="folder for the reports, created by the script (default %(default)s)")
    s.add_argument("--tui", default="tui", help="the tui command on the nodes (default %(default)s)")
    s.add_argument("--time", dest="time_limit", default="00:30:00", help="--time (default %(default)s)")
    s.add_argument("--partition", help="--partition")
    s.add_argument("--account", help="--account")
    s.add_argument("--cpus-per-gpu", type=int, default=1, help="CPUs per step (default %(default)s)")
    s.add_argument("--no-gres", dest="gres", action="store_false",
                   help="no GPU gres: steps pass --device i instead (clusters without gres; --backend sim rehearsals)")
    s.add_argument("--log", default="%x-%j.out", help="the batch script's --output (default %(default)s)")
    s.set_defaults(func=run)


def fleet_job(args: argparse.Namespace):
    from engine import FleetJob, parse_pairs

    return FleetJob(name=args.name, gpus=args.gpus, backend=args.backend, kernel=args.kernel, shape=args.shape,
                    dtype=args.dtype, profile=args.profile, iterations=args.iterations, warmup=args.warmup,
                    block_size=args.block_size, memory_pipelining=args.memory_pipelining, peers=args.peers,
                    checks=args.checks, extra_env=parse_pairs("--env", args.env))


def _k8s(args: argparse.Namespace) -> tuple[str, object]:
    from engine import K8sOptions, parse_pairs
    from engine import k8s_as_list as as_list
    from engine import k8s_manifests as manifests
    from engine import k8s_to_yaml as to_yaml

    opts = K8sOptions(image=args.image, namespace=args.namespace, every_node=args.every_node, every_s=args.every,
                      host_path=args.host_path, pvc=args.pvc, run_as_user=args.run_as_user,
                      node_selector=parse_pairs("--node-selector", args.node_selector), deadline_s=args.deadline,
                      ttl_s=args.ttl, pull_policy=args.pull_policy)
    items = manifests(fleet_job(args), opts)
    return to_yaml(items), as_list(items)


def _slurm(args: argparse.Namespace) -> tuple[str, object]:
    from engine import SlurmOptions
    from engine import slurm_script as script

    opts = SlurmOptions(results_dir=args.results_dir, tui=args.tui, time_limit=args.time_limit,
                        partition=args.partition, account=args.account, cpus_per_gpu=args.cpus_per_gpu,
                        gres=args.gres, log=args.log)
    text = script(fleet_job(args), opts)
    return text, {"format": "slurm", "script": text, "results_dir": opts.results_dir}


def _write(path: Path, text: str, executable: bool) -> None:
    from engine import InputError

    try:
        write_atomic(path, text, mode=0o644, what="--output")
        if executable:
            os.chmod(path, 0o755)
    except OSError as exc:
        raise InputError(f"--output={path}: cannot write: {exc.strerror or exc}",
                         fix="give a file in a folder you can write") from None


def run(args: argparse.Namespace) -> int:
    text, obj = _k8s(args) if args.target == "k8s" else _slurm(args)
    if args.output is not None:
        _write(args.output, text, executable=args.target == "slurm")
        if args.json:
            print_json({"written": str(args.output), "target": args.target, "content": obj})
        else:
            print(f"written to {args.output}", file=sys.stderr)
        return 0
    if args.json:
        print_json(obj)
    else:
        sys.stdout.write(text)
    return 0
