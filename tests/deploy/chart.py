"""The Helm chart (deploy/helm/) rendered offline with Helm's own engine (helm-python-sdk binds Helm's Go
library), validated against Kubernetes' schemas (kubernetes-validate) and checked for the invariants of the
production shape. Each check returns the problems it finds, so a test can plant a mistake and see it named."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import helm_python
import kubernetes_validate
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm"
PROFILES = ("default", "ha", "external-db")
# Two supported Kubernetes versions, oldest and newest the chart is checked against.
KUBERNETES_VERSIONS = ("1.29.0", "1.34.0")
# Custom resources (KEDA's): no schema in kubernetes-validate; `custom_resource_problems` checks their shape.
CUSTOM_KINDS = {("keda.sh/v1alpha1", "ScaledObject"), ("keda.sh/v1alpha1", "TriggerAuthentication")}
WORKLOADS = {"Deployment", "StatefulSet"}


@cache
def chart() -> helm_python.Chart:
    return helm_python.Chart.load(CHART)


def profile_values(profile: str) -> dict:
    return yaml.safe_load((CHART / "ci" / f"{profile}-values.yaml").read_text())


def render(values: dict) -> list[dict]:
    """Every object the chart renders for a first install with `values` (schema-checked by Helm)."""
    manifests = chart().render(values, name="empathy", namespace="studies", is_install=True)
    return [doc for path in sorted(manifests) for doc in yaml.safe_load_all(manifests[path]) if doc]


def _name(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def schema_problems(objects: list[dict], version: str) -> list[str]:
    problems = []
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            problems.append(f"{_name(obj)} on {version}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{_name(obj)} on {version}: no such kind/apiVersion")
    return problems


def custom_resource_problems(objects: list[dict]) -> list[str]:
    """KEDA's ScaledObject: targets a Deployment of the release, a redis trigger on a list the chart's workers
    consume, replicas bounded."""
    deployments = {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"}
    queues = {q for _, q in worker_queues(objects)}
    problems = []
    for obj in objects:
        if obj["kind"] != "ScaledObject":
            continue
        spec = obj["spec"]
        if spec.get("scaleTargetRef", {}).get("name") not in deployments:
            problems.append(f"{_name(obj)}: scales no Deployment of the release")
        if not 1 <= spec.get("minReplicaCount", 0) <= spec.get("maxReplicaCount", 0):
            problems.append(f"{_name(obj)}: replica bounds")
        for trigger in spec.get("triggers", []):
            meta = trigger.get("metadata", {})
            if (
                trigger.get("type") != "redis"
                or meta.get("listName") not in queues
                or not meta.get("address")
            ):
                problems.append(f"{_name(obj)}: trigger is not the length of a worker queue's Redis list")
    return problems


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def containers(obj: dict, *, init: bool = True) -> list[dict]:
    spec = pod_spec(obj)
    return [*(spec.get("initContainers", []) if init else []), *spec["containers"]]


def component(obj: dict) -> str:
    return obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", "")


def pods(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] in WORKLOADS | {"Job"}]


def effective_min_replicas(obj: dict, objects: list[dict]) -> int:
    """The fewest pods the workload runs: its replicas, or its autoscaler's minimum."""
    name = obj["metadata"]["name"]
    for other in objects:
        if other["kind"] == "HorizontalPodAutoscaler" and other["spec"]["scaleTargetRef"]["name"] == name:
            return other["spec"]["minReplicas"]
        if other["kind"] == "ScaledObject" and other["spec"]["scaleTargetRef"]["name"] == name:
            return other["spec"]["minReplicaCount"]
    return obj["spec"].get("replicas", 1)


def probe_problems(objects: list[dict]) -> list[str]:
    """Every serving container (one with a port) has startup, readiness and liveness probes; web's are on
    /healthz, and it sleeps in preStop before gunicorn stops."""
    problems = []
    for obj in objects:
        if obj["kind"] not in WORKLOADS:
            continue
        for c in containers(obj, init=False):
            if not c.get("ports"):
                continue
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if probe not in c:
                    problems.append(f"{_name(obj)}/{c['name']}: no {probe}")
                elif component(obj) == "web" and c[probe].get("httpGet", {}).get("path") != "/healthz":
                    problems.append(f"{_name(obj)}/{c['name']}: {probe} not on /healthz")
            if component(obj) == "web" and "preStop" not in c.get("lifecycle", {}):
                problems.append(f"{_name(obj)}/{c['name']}: no preStop")
    return problems


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def pdb_problems(objects: list[dict]) -> list[str]:
    """A PodDisruptionBudget over every workload that runs more than one pod."""
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    problems = []
    for obj in objects:
        if obj["kind"] not in WORKLOADS or effective_min_replicas(obj, objects) <= 1:
            continue
        labels = obj["spec"]["template"]["metadata"]["labels"]
        if not any(_selects(b["spec"]["selector"], labels) for b in budgets):
            problems.append(f"{_name(obj)}: {effective_min_replicas(obj, objects)} replicas and no PDB")
    return problems


def beat_problems(objects: list[dict]) -> list[str]:
    """One beat Deployment, one replica, replaced with Recreate, scaled by nothing."""
    beats = [o for o in objects if o["kind"] in WORKLOADS and component(o) == "beat"]
    if len(beats) != 1:
        return [f"{len(beats)} beat workloads"]
    beat, problems = beats[0], []
    if beat["spec"].get("replicas") != 1:
        problems.append(f"beat replicas {beat['spec'].get('replicas')}")
    if beat["spec"].get("strategy", {}).get("type") != "Recreate":
        problems.append("beat is not replaced with Recreate (an upgrade would run two)")
    for other in objects:
        if other["kind"] in {"HorizontalPodAutoscaler", "ScaledObject"}:
            if other["spec"]["scaleTargetRef"]["name"] == beat["metadata"]["name"]:
                problems.append(f"{_name(other)} scales beat")
    return problems


def migration_problems(objects: list[dict]) -> list[str]:
    """`migrate` runs in one Job, a pre-upgrade (and install) hook; no pod of a Deployment migrates."""
    problems = []
    jobs = [o for o in objects if o["kind"] == "Job" and component(o) == "migrate"]
    if len(jobs) != 1:
        problems.append(f"{len(jobs)} migration Jobs")
    for job in jobs:
        hooks = set(job["metadata"].get("annotations", {}).get("helm.sh/hook", "").split(","))
        if "pre-upgrade" not in hooks or not hooks & {"pre-install", "post-install"}:
            problems.append(f"{_name(job)}: hooks {sorted(hooks)}, not an install and pre-upgrade hook")
    for obj in objects:
        if obj["kind"] not in WORKLOADS:
            continue
        for c in containers(obj):
            command = [*c.get("command", []), *c.get("args", [])]
            text = " ".join(command)
            if "migrate" in text and "migrate --check" not in text:
                problems.append(f"{_name(obj)}/{c['name']}: migrates on pod start")
    return problems


def resource_problems(objects: list[dict]) -> list[str]:
    """Every container, init containers included, requests CPU and memory and is limited in memory."""
    problems = []
    for obj in pods(objects):
        for c in containers(obj):
            resources = c.get("resources", {})
            if not {"cpu", "memory"} <= set(resources.get("requests", {})):
                problems.append(f"{_name(obj)}/{c['name']}: no CPU and memory requests")
            if "memory" not in resources.get("limits", {}):
                problems.append(f"{_name(obj)}/{c['name']}: no memory limit")
    return problems


def root_problems(objects: list[dict]) -> list[str]:
    """No container runs as root or may gain privileges."""
    problems = []
    for obj in pods(objects):
        pod = pod_spec(obj).get("securityContext", {})
        for c in containers(obj):
            own = c.get("securityContext", {})
            user = own.get("runAsUser", pod.get("runAsUser"))
            non_root = own.get("runAsNonRoot", pod.get("runAsNonRoot"))
            if non_root is not True or user in (None, 0):
                problems.append(f"{_name(obj)}/{c['name']}: may run as root")
            if own.get("allowPrivilegeEscalation") is not False or own.get("privileged"):
                problems.append(f"{_name(obj)}/{c['name']}: may gain privileges")
    return problems


def app_pod_problems(objects: list[dict]) -> list[str]:
    """The application's pods write nothing to a volume that outlives them: a read-only root filesystem,
    scratch in emptyDir only (static files are in the image, served by WhiteNoise)."""
    problems = []
    for obj in pods(objects):
        if component(obj) in {"postgresql", "redis"}:
            continue
        volumes = {v["name"]: v for v in pod_spec(obj).get("volumes", [])}
        if any("emptyDir" not in v for v in volumes.values()) or obj["spec"].get("volumeClaimTemplates"):
            problems.append(f"{_name(obj)}: a volume other than emptyDir")
        for c in containers(obj):
            if c.get("securityContext", {}).get("readOnlyRootFilesystem") is not True:
                problems.append(f"{_name(obj)}/{c['name']}: writable root filesystem")
    return problems


def worker_queues(objects: list[dict]) -> list[tuple[str, str]]:
    """(Deployment, queue) of every Celery worker."""
    found = []
    for obj in objects:
        if obj["kind"] == "Deployment" and component(obj).startswith("worker-"):
            command = obj["spec"]["template"]["spec"]["containers"][0]["command"]
            found.append((obj["metadata"]["name"], command[command.index("--queues") + 1]))
    return found


def worker_problems(objects: list[dict]) -> list[str]:
    """One worker Deployment per queue: the default queue and generation's (the one GENERATION_QUEUE names)."""
    queues = [q for _, q in worker_queues(objects)]
    generation = {
        e["value"]
        for o in pods(objects)
        for c in containers(o)
        for e in c.get("env", [])
        if e["name"] == "GENERATION_QUEUE"
    }
    problems = []
    if len(queues) != len(set(queues)):
        problems.append(f"two worker Deployments on one queue: {queues}")
    if "celery" not in queues:
        problems.append("no worker on the default queue")
    if len(generation) != 1 or not generation <= set(queues) - {"celery"}:
        problems.append(f"generation's queue {sorted(generation)} has no worker of its own")
    return problems


def web_problems(objects: list[dict]) -> list[str]:
    """Web: at least two pods, an HPA on CPU when autoscaled."""
    problems = []
    for obj in objects:
        if obj["kind"] == "Deployment" and component(obj) == "web":
            if effective_min_replicas(obj, objects) < 2:
                problems.append(f"{_name(obj)}: fewer than 2 replicas")
            if "replicas" not in obj["spec"]:
                hpas = [
                    o
                    for o in objects
                    if o["kind"] == "HorizontalPodAutoscaler"
                    and o["spec"]["scaleTargetRef"]["name"] == obj["metadata"]["name"]
                ]
                if not any(m["resource"]["name"] == "cpu" for h in hpas for m in h["spec"]["metrics"]):
                    problems.append(f"{_name(obj)}: no replicas and no HPA on CPU")
    return problems


INVARIANTS = {
    "probes": probe_problems,
    "pdb": pdb_problems,
    "beat": beat_problems,
    "migrations": migration_problems,
    "resources": resource_problems,
    "non-root": root_problems,
    "no writable volume": app_pod_problems,
    "workers": worker_problems,
    "web": web_problems,
    "custom resources": custom_resource_problems,
}


def invariant_problems(objects: list[dict]) -> list[str]:
    return [f"{name}: {problem}" for name, check in INVARIANTS.items() for problem in check(objects)]
