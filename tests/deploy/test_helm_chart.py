"""deploy/helm/ rendered with Helm's engine for three profiles, validated strictly against two Kubernetes
versions' schemas, and held to the production shape's invariants; every invariant is shown to catch a
planted mistake. No cluster needed."""

import copy

import helm_python
import pytest

from . import chart


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    return {profile: chart.render(chart.profile_values(profile)) for profile in chart.PROFILES}


@pytest.mark.parametrize("profile", chart.PROFILES)
def test_every_object_is_valid_on_two_kubernetes_versions(rendered, profile):
    objects = rendered[profile]
    assert len(objects) >= 7
    for version in chart.KUBERNETES_VERSIONS:
        assert chart.schema_problems(objects, version) == []


@pytest.mark.parametrize("profile", chart.PROFILES)
def test_the_production_shape_holds(rendered, profile):
    assert chart.invariant_problems(rendered[profile]) == []


def test_the_profiles_differ_where_they_should(rendered):
    kinds = {p: {(o["kind"], chart.component(o)) for o in objs} for p, objs in rendered.items()}
    assert ("StatefulSet", "postgresql") in kinds["default"]
    assert ("StatefulSet", "postgresql") not in kinds["external-db"] | kinds["ha"]
    assert ("ScaledObject", "worker-generation") in kinds["ha"]
    assert ("HorizontalPodAutoscaler", "web") not in kinds["external-db"]
    hooks = {
        p: next(o for o in objs if o["kind"] == "Job")["metadata"]["annotations"]["helm.sh/hook"]
        for p, objs in rendered.items()
    }
    # Bundled database: created by the release, so migrated just after install; an external one before.
    assert hooks == {
        "default": "post-install,pre-upgrade",
        "ha": "pre-install,pre-upgrade",
        "external-db": "pre-install,pre-upgrade",
    }


def _find(objects, kind, component):
    return next(o for o in objects if o["kind"] == kind and chart.component(o) == component)


def _web(objects):
    return _find(objects, "Deployment", "web")


def _drop_pdbs(objects):
    objects[:] = [o for o in objects if o["kind"] != "PodDisruptionBudget"]


def _second_beat(objects):
    _find(objects, "Deployment", "beat")["spec"]["replicas"] = 2


def _beat_rolling(objects):
    _find(objects, "Deployment", "beat")["spec"]["strategy"] = {"type": "RollingUpdate"}


def _unhooked(objects):
    del _find(objects, "Job", "migrate")["metadata"]["annotations"]["helm.sh/hook"]


def _migrate_on_start(objects):
    _web(objects)["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "manage.py migrate"]


def _no_readiness(objects):
    del _web(objects)["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]


def _liveness_elsewhere(objects):
    _web(objects)["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["path"] = "/"


def _no_init_resources(objects):
    del _find(objects, "Deployment", "beat")["spec"]["template"]["spec"]["initContainers"][0]["resources"]


def _root(objects):
    container = _find(objects, "Deployment", "worker-generation")["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["runAsUser"] = 0


def _escalation(objects):
    container = _find(objects, "Job", "migrate")["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["allowPrivilegeEscalation"] = True


def _static_volume(objects):
    spec = _web(objects)["spec"]["template"]["spec"]
    spec["volumes"].append({"name": "static", "persistentVolumeClaim": {"claimName": "static"}})


def _one_queue(objects):
    command = _find(objects, "Deployment", "worker-generation")["spec"]["template"]["spec"]["containers"][0]
    command["command"][command["command"].index("--queues") + 1] = "celery"


def _one_web(objects):
    objects[:] = [o for o in objects if o["kind"] != "HorizontalPodAutoscaler"]
    _web(objects)["spec"]["replicas"] = 1


def _keda_on_nothing(objects):
    _find(objects, "ScaledObject", "worker-generation")["spec"]["triggers"][0]["metadata"]["listName"] = "x"


@pytest.mark.parametrize(
    ("plant", "invariant"),
    [
        (_no_readiness, "probes"),
        (_liveness_elsewhere, "probes"),
        (_drop_pdbs, "pdb"),
        (_second_beat, "beat"),
        (_beat_rolling, "beat"),
        (_unhooked, "migrations"),
        (_migrate_on_start, "migrations"),
        (_no_init_resources, "resources"),
        (_root, "non-root"),
        (_escalation, "non-root"),
        (_static_volume, "no writable volume"),
        (_one_queue, "workers"),
        (_one_web, "web"),
        (_keda_on_nothing, "custom resources"),
    ],
)
def test_each_invariant_catches_a_planted_mistake(rendered, plant, invariant):
    objects = copy.deepcopy(rendered["ha"])
    plant(objects)
    problems = chart.invariant_problems(objects)
    assert any(p.startswith(f"{invariant}: ") for p in problems), problems


def test_the_schema_check_catches_a_misspelt_field(rendered):
    objects = copy.deepcopy(rendered["default"])
    _web(objects)["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    for version in chart.KUBERNETES_VERSIONS:
        problems = chart.schema_problems(objects, version)
        assert len(problems) == 1 and "Deployment/empathy-web" in problems[0], problems


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"web": {"replicas": 1}}, "/web/replicas"),
        ({"secrets": {"secretKey": "short"}}, "/secrets/secretKey"),
        ({"podSecurityContext": {"runAsNonRoot": False, "runAsUser": 0}}, "/podSecurityContext"),
        ({"config": {"storage": {"backend": "local"}}}, "/config/storage/backend"),
    ],
)
def test_values_the_schema_refuses(values, message):
    merged = chart.profile_values("default")
    for key, value in values.items():
        merged[key] = {**merged.get(key, {}), **value}
    with pytest.raises(helm_python.HelmValuesError, match=message):
        chart.render(merged)


def test_a_release_without_a_shared_secret_is_refused():
    values = chart.profile_values("default")
    del values["secrets"]
    with pytest.raises(helm_python.HelmError, match="every replica must share it"):
        chart.render(values)
