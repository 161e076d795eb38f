"""`tui export k8s|slurm`: the manifests load as the official Kubernetes client's typed models (and
round-trip without losing a field, so a misspelt key cannot hide), kubectl decodes them where it is
installed, the security context is the non-root one, and bad input is named with exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from tui.cli.main import main

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is in the test extra")
from kubernetes.client import ApiClient  # noqa: E402

KIND_MODEL = {"Job": "V1Job", "DaemonSet": "V1DaemonSet"}


def export(capsys, *argv: str) -> tuple[int, str]:
    code = main(["export", *argv])
    return code, capsys.readouterr().out


def typed(doc: dict):
    """``doc`` as the client's model, after checking that it serialises back to the same dict."""
    client = ApiClient()
    obj = client._ApiClient__deserialize(doc, KIND_MODEL[doc["kind"]])
    assert client.sanitize_for_serialization(obj) == doc, "a field the model does not know was dropped"
    return obj


def test_job_loads_as_a_typed_v1job_with_gpu_limits_and_a_non_root_context(capsys):
    code, out = export(capsys, "k8s", "--gpus", "4", "--backend", "sim", "--namespace", "gpu-ops",
                       "--image", "registry.example.com/sol-cockpit:0.1.0", "--block-size", "128x256",
                       "--node-selector", "nvidia.com/gpu.product=H100")
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == 1
    job = typed(docs[0])
    assert job.metadata.namespace == "gpu-ops"
    pod = job.spec.template.spec
    assert pod.restart_policy == "Never" and job.spec.backoff_limit == 0
    assert pod.node_selector == {"nvidia.com/gpu.product": "H100"}
    (c,) = pod.containers
    assert c.image == "registry.example.com/sol-cockpit:0.1.0"
    assert c.resources.limits == {"nvidia.com/gpu": "4"}
    assert c.args[:2] == ["fleet-report", "--output-dir"] and "--backend" in c.args and "sim" in c.args
    assert "$(NODE_NAME)" in c.args  # expanded by the kubelet from the downward API
    sc = c.security_context
    assert sc.run_as_non_root is True and sc.run_as_user == 10001 and sc.run_as_user != 0
    assert sc.allow_privilege_escalation is False and sc.read_only_root_filesystem is True
    assert sc.capabilities.drop == ["ALL"] and sc.privileged is False
    assert pod.security_context.run_as_non_root is True
    env = {e.name: e for e in c.env}
    assert env["BLOCK_SIZE"].value == "128x256"  # knobs as the env vars the manifests already use
    assert env["SOL_COCKPIT_SIM_DEVICES"].value == "4"  # the rehearsal simulates the GPUs it asks for
    assert env["NODE_NAME"].value_from.field_ref.field_path == "spec.nodeName"
    mounts = {m.name: m.mount_path for m in c.volume_mounts}
    vols = {v.name: v for v in pod.volumes}
    assert vols["reports"].host_path.path == "/var/lib/sol-cockpit/reports"
    assert c.args[c.args.index("--output-dir") + 1] == mounts["reports"]
    assert vols["scratch"].empty_dir is not None and mounts["scratch"] == "/tmp"
    for var in ("SOL_COCKPIT_DATA_DIR", "SOL_COCKPIT_CACHE_DIR", "SOL_COCKPIT_CONFIG_DIR", "HOME"):
        assert env[var].value.startswith("/tmp")  # the only writable places besides the reports


def test_every_node_is_a_daemonset_whose_selector_matches_its_pods(capsys):
    code, out = export(capsys, "k8s", "--every-node", "--every", "3600", "--pvc", "fleet-reports")
    assert code == 0
    ds = typed(yaml.safe_load(out))
    assert ds.kind == "DaemonSet"
    labels = ds.spec.template.metadata.labels
    assert all(labels.get(k) == v for k, v in ds.spec.selector.match_labels.items())
    pod = ds.spec.template.spec
    assert pod.restart_policy == "Always"
    args = pod.containers[0].args
    assert args[args.index("--every") + 1] == "3600"
    assert {v.name: v for v in pod.volumes}["reports"].persistent_volume_claim.claim_name == "fleet-reports"
    assert pod.containers[0].resources.limits == {"nvidia.com/gpu": "1"}


def test_json_is_a_v1_list_of_the_same_manifests(capsys):
    _, text = export(capsys, "k8s", "--backend", "sim")
    code, out = export(capsys, "k8s", "--backend", "sim", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "List" and doc["items"] == list(yaml.safe_load_all(text))


def test_output_file_and_the_container_args_parse_as_fleet_report_flags(capsys, tmp_path):
    from tui.cli.main import build_parser

    path = tmp_path / "job.yaml"
    code, out = export(capsys, "k8s", "--backend", "sim", "--gpus", "0", "--shape", "m=256,n=256,k=256",
                       "--no-peers", "-o", str(path))
    assert code == 0 and out == ""
    job = typed(yaml.safe_load(path.read_text()))
    c = job.spec.template.spec.containers[0]
    assert c.resources.limits is None  # --gpus 0 (a simulated rehearsal) asks for no GPU
    args = build_parser().parse_args(c.args)
    assert args.command == "fleet-report" and args.backend == "sim" and args.peers is False
    assert args.shape == "m=256,n=256,k=256"


@pytest.mark.parametrize("argv, field", [
    (["k8s", "--gpus", "0"], "--gpus"),
    (["k8s", "--gpus", "65"], "--gpus"),
    (["k8s", "--name", "Bad_Name"], "--name"),
    (["k8s", "--namespace", "Bad.NS"], "--namespace"),
    (["k8s", "--image", "has space"], "--image"),
    (["k8s", "--host-path", "relative/dir"], "--host-path"),
    (["k8s", "--run-as-user", "0"], "--run-as-user"),
    (["k8s", "--node-selector", "novalue"], "--node-selector"),
    (["k8s", "--shape", "m=abc"], "shape"),
    (["k8s", "--block-size", "7x7"], "BLOCK_SIZE"),
    (["k8s", "--profile", "no-such-gpu"], "profile"),
    (["slurm", "--time", "soon"], "--time"),
    (["slurm", "--gpus", "0"], "--gpus"),
    (["slurm", "--partition", "a b"], "--partition"),
])
def test_bad_input_is_named_with_exit_2(capsys, argv, field):
    code = main(["export", *argv, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["exit_code"] == 2 and out["status"] == "invalid"
    if field.startswith("--"):
        assert out["field"] == field, out
        assert out["fix"]
    else:  # the task's own validation, as tui bench names it
        assert field in out["error"], out


def test_slurm_script_asks_for_gres_and_runs_one_step_per_gpu(capsys):
    code, out = export(capsys, "slurm", "--gpus", "4", "--results-dir", "/shared/reports", "--partition", "gpu",
                       "--pipelining", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --gres=gpu:4" in lines and "#SBATCH --ntasks=4" in lines and "#SBATCH --partition=gpu" in lines
    step = next(line for line in lines if line.strip().startswith("srun"))
    assert "--gres=gpu:1" in step and "--exclusive" in step
    assert "$(seq 0 3)" in out and "wait" in out and 'pids+=("$!")' in out
    assert "export MEMORY_PIPELINING=3" in out
    assert "--device" not in out  # each step sees the one GPU Slurm bound to it
    assert "RESULTS=/shared/reports" in out


def test_slurm_without_gres_passes_the_device(capsys):
    code, out = export(capsys, "slurm", "--gpus", "2", "--no-gres", "--backend", "sim")
    assert code == 0
    assert "--gres" not in out and '--device "$i"' in out


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_slurm_script_is_valid_bash(tmp_path, capsys):
    path = tmp_path / "job.sbatch"
    assert main(["export", "slurm", "--gpus", "2", "-o", str(path)]) == 0
    assert path.stat().st_mode & 0o111
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def _kubectl_cluster() -> bool:
    try:
        return subprocess.run(["kubectl", "version", "--request-timeout=3s"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("flags", [[], ["--every-node"]])
def test_kubectl_decodes_the_manifests(tmp_path, capsys, flags):
    """``kubectl apply --dry-run=client`` where a cluster answers (it needs the server's API list);
    otherwise ``kubectl set env --local``, which decodes the file into kubectl's typed objects
    offline and fails on a wrongly typed field."""
    path = tmp_path / "job.yaml"
    assert main(["export", "k8s", "--backend", "sim", *flags, "-o", str(path)]) == 0
    online = _kubectl_cluster()

    def kubectl(file):
        argv = (["kubectl", "apply", "--dry-run=client", "-f", str(file), "-o", "name"] if online else
                ["kubectl", "set", "env", "--local", "-f", str(file), "--list"])
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    out = kubectl(path)
    assert out.returncode == 0, out.stderr
    if not online:
        assert "NODE_NAME from field path spec.nodeName" in out.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("runAsNonRoot: true", "runAsNonRoot: maybe", 1))
    assert kubectl(bad).returncode != 0  # the check can fail


@pytest.mark.parametrize("flags,field", [
    (["--env", "A;touch X;B=1"], "--env 'A;touch X;B'"),
    (["--env", "A\nB=1"], "--env 'A\\nB'"),
    (["--env", "$(id)=1"], "--env '$(id)'"),
    (["--env", "OK=one\ntwo"], "--env OK="),
    (["--log", "a b.out"], "--log="),
    (["--log", "a\n#SBATCH --wrap=x"], "--log="),
    (["--results-dir", "r\nrm -rf ~"], "--results-dir="),
])
def test_slurm_refuses_what_would_add_a_line_or_a_command(capsys, flags, field):
    code = main(["export", "slurm", "--gpus", "1", *flags])
    err = capsys.readouterr().err
    assert code == 2 and field in err, err


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_hostile_values_in_the_slurm_script_run_no_command(tmp_path, capsys):
    """The script runs under bash with a stub srun: every hostile value arrives as data."""
    marker = tmp_path / "MARKER"
    hostile = f"$(touch {marker})`touch {marker}`;touch {marker};'\"\\"
    path = tmp_path / "job.sbatch"
    assert main(["export", "slurm", "--gpus", "2", "-o", str(path), "--env", f"NCCL_DEBUG={hostile}",
                 "--results-dir", str(tmp_path / f"r {hostile}"), "--tui", f"tui {hostile}",
                 "--block-size", "128x128"]) in (0, 2)
    if not path.exists():  # the block size is planned against the simulated device: use no knob
        assert main(["export", "slurm", "--gpus", "2", "-o", str(path), "--env", f"NCCL_DEBUG={hostile}",
                     "--results-dir", str(tmp_path / f"r {hostile}"), "--tui", f"tui {hostile}"]) == 0
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "srun").write_text('#!/bin/sh\nprintf "%s\\n" "$@" >> "$SRUN_LOG"\nprintf "%s\\n" "$NCCL_DEBUG" >> "$SRUN_LOG"\n')
    (stub / "srun").chmod(0o755)
    log = tmp_path / "srun.log"
    run = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                         env={"PATH": f"{stub}:/usr/bin:/bin", "SRUN_LOG": str(log), "SLURMD_NODENAME": "n1"})
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    calls = log.read_text()
    assert calls.count(hostile) >= 4  # the value, the tui path and the results folder, as data
