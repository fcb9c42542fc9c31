"""The Kubernetes manifests in deploy/k8s/: every one parses, and they agree with each other and
with the image (Dockerfile, deploy/docker-entrypoint.sh) and the server's code: labels and
selectors, ports and probe ports, names, ConfigMap keys and the flags in them, the drain time,
the autoscaler's metric, the PodMonitor's job, and the batch Job's image, server and flags.

Run: /usr/bin/python3 -m unittest -v tests/container/test_k8s.py (from the repository root;
needs python3-yaml). No cluster is needed.
"""

import glob
import os
import re
import shlex
import unittest

import yaml

ROOT = os.environ.get("GLOSSA_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")
HELM_VALUES = {"prometheus-adapter-values.yaml"}  # Helm values, not Kubernetes objects

DNS1123_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def absl_flags(*path):
    """The names of the ABSL_FLAGs a source file defines."""
    return set(re.findall(r"ABSL_FLAG\(\s*[^,]+,\s*(\w+)\s*,", read(*path)))


def seconds(duration):
    """An absl / Go duration ("30s", "1m30s", "500ms") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def default_shutdown_timeout():
    m = re.search(r"shutdown_timeout,\s*absl::Seconds\((\d+)\)", read("server", "main.cc"))
    assert m, "--shutdown_timeout's default not found in server/main.cc"
    return float(m.group(1))


def cpu_cores(quantity):
    quantity = str(quantity)
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def parse_flags(text):
    """'--a=1 --b 2 --c' -> {'a': '1', 'b': '2', 'c': None}; every word must be a flag."""
    words, flags, i = shlex.split(text), {}, 0
    while i < len(words):
        word = words[i]
        assert word.startswith("-"), f"not a flag: {word!r} in {text!r}"
        name = word.lstrip("-")
        if "=" in name:
            name, value = name.split("=", 1)
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
            i += 1
        else:
            value = None
        flags[name] = value
        i += 1
    return flags


def load_manifests():
    docs = []
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml")) + glob.glob(os.path.join(K8S, "*.yml"))):
        if os.path.basename(path) in HELM_VALUES:
            continue
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.append((os.path.basename(path), doc))
    return docs


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_manifests()
        cls.objects = {}
        for _, doc in cls.docs:
            cls.objects.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
        cls.deployment = cls.one("Deployment", "glossa")
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = next(c for c in cls.pod["spec"]["containers"] if c["name"] == "glossa")
        cls.ports = {p["name"]: p["containerPort"] for p in cls.container["ports"]}
        cls.configmap = cls.one("ConfigMap", "glossa-server")
        cls.env = {}
        for e in cls.container.get("env", []):
            ref = e.get("valueFrom", {}).get("configMapKeyRef")
            # A missing ConfigMap or key fails test_configmap_keys_exist_and_are_used.
            cls.env[e["name"]] = (cls.objects["ConfigMap"].get(ref["name"], {}).get("data", {})
                                  .get(ref["key"], "") if ref else e.get("value", ""))
        cls.server_flags = absl_flags("server", "main.cc")
        cls.flags = parse_flags(cls.env.get("GLOSSA_FLAGS", ""))
        cls.models = dict(spec.split("=", 1) for spec in cls.env["GLOSSA_MODELS"].split(","))
        cls.dockerfile = read("Dockerfile")
        cls.entrypoint = read("deploy", "docker-entrypoint.sh")

    @classmethod
    def one(cls, kind, name):
        assert name in cls.objects.get(kind, {}), f"no {kind} {name} in deploy/k8s"
        return cls.objects[kind][name]

    def pod_labels(self):
        return self.pod["metadata"]["labels"]

    def assertSelects(self, selector, what):
        self.assertTrue(selector, f"{what}: empty selector")
        for k, v in selector.items():
            self.assertEqual(self.pod_labels().get(k), v,
                             f"{what}: selector {k}={v} does not match the pods' labels")

    # --- Every manifest -------------------------------------------------------------------

    def test_every_file_parses_into_named_objects(self):
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(K8S, "*.y*ml")))
        for name in files:
            with open(os.path.join(K8S, name), encoding="utf-8") as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
            self.assertTrue(docs, f"{name}: empty")
        for file, doc in self.docs:
            with self.subTest(file=file, kind=doc.get("kind")):
                self.assertIn("apiVersion", doc)
                self.assertIn("kind", doc)
                self.assertRegex(doc["metadata"]["name"], DNS1123_NAME)
        seen = set()
        for _, doc in self.docs:
            key = (doc["kind"], doc["metadata"]["name"])
            self.assertNotIn(key, seen, f"{key} defined twice")
            seen.add(key)
        for kind in ("ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler",
                     "PodMonitor", "Job"):
            self.assertIn(kind, self.objects, f"no {kind} in deploy/k8s")

    def test_port_names_are_valid(self):
        for _, doc in self.docs:
            spec = doc.get("spec", {})
            pod_spec = spec.get("template", {}).get("spec", {})
            for c in pod_spec.get("containers", []):
                for p in c.get("ports", []):
                    self.assertRegex(p["name"], PORT_NAME)
                    self.assertLessEqual(len(p["name"]), 15)
            if doc["kind"] == "Service":
                for p in spec["ports"]:
                    self.assertRegex(p["name"], PORT_NAME)

    # --- Labels, selectors, ports -----------------------------------------------------------

    def test_deployment_selector_matches_its_pods(self):
        self.assertSelects(self.deployment["spec"]["selector"]["matchLabels"], "Deployment")
        self.assertNotIn("replicas", self.deployment["spec"],
                         "the HorizontalPodAutoscaler owns replicas; re-applying would reset it")

    def test_services_select_the_pods_and_target_their_ports(self):
        services = self.objects["Service"]
        self.assertGreaterEqual(len(services), 2)
        for name, svc in services.items():
            with self.subTest(service=name):
                self.assertSelects(svc["spec"]["selector"], f"Service {name}")
                for p in svc["spec"]["ports"]:
                    target = p.get("targetPort", p["port"])
                    if isinstance(target, str):
                        self.assertIn(target, self.ports, f"Service {name}: targetPort {target}")
                        target = self.ports[target]
                    self.assertIn(target, self.ports.values())
        headless = [s for s in services.values() if s["spec"].get("clusterIP") == "None"]
        normal = [s for s in services.values() if s["spec"].get("clusterIP") != "None"]
        self.assertEqual(len(headless), 1, "one headless Service (clusterIP: None)")
        self.assertTrue(normal, "a normal (ClusterIP) Service too")
        # Clients of a headless Service dial the pods directly: no port mapping.
        for p in headless[0]["spec"]["ports"]:
            self.assertEqual(p["port"], self.ports["grpc"], "headless Service port != containerPort")

    def test_container_ports_match_the_image(self):
        exposed = {int(p) for line in re.findall(r"^EXPOSE\s+(.+)$", self.dockerfile, re.M)
                   for p in line.split()}
        self.assertEqual(set(self.ports.values()), exposed, "containerPorts vs the Dockerfile's EXPOSE")
        code = re.sub(r"^\s*#.*$", "", self.entrypoint, flags=re.M)  # not the comments
        listen = re.search(r"glossa-server --listen\s+0\.0\.0\.0:(\d+)", code)
        metrics = re.search(r"--metrics_listen\s+0\.0\.0\.0:(\d+)", code)
        self.assertTrue(listen and metrics, "the entrypoint listens on 0.0.0.0")
        self.assertEqual(self.ports["grpc"], int(listen.group(1)))
        self.assertEqual(self.ports["metrics"], int(metrics.group(1)))
        for flag in ("listen", "metrics_listen"):
            self.assertNotIn(flag, self.flags, f"--{flag} in GLOSSA_FLAGS moves the port away "
                             "from the containerPort and probes")
        healthcheck = re.search(r"HEALTHCHECK[^\n]*\n?[^\n]*--server\", \"127\.0\.0\.1:(\d+)",
                                self.dockerfile)
        self.assertTrue(healthcheck, "HEALTHCHECK through glossa-client --server 127.0.0.1:PORT")
        self.assertEqual(int(healthcheck.group(1)), self.ports["grpc"])

    def test_probes_are_grpc_health_checks_on_the_grpc_port(self):
        registered = set(re.findall(r'SetServingStatus\("([^"]+)"', read("server", "main.cc")))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            with self.subTest(probe=probe):
                spec = self.container[probe]
                self.assertEqual(set(spec) & {"grpc", "httpGet", "tcpSocket", "exec"}, {"grpc"})
                self.assertIsInstance(spec["grpc"]["port"], int, "grpc probes take a port number")
                self.assertEqual(spec["grpc"]["port"], self.ports["grpc"])
                service = spec["grpc"].get("service", "")
                self.assertTrue(service == "" or service in registered or service in self.models,
                                f"health service {service!r} is not one the server registers")

    # --- ConfigMap, flags, models ------------------------------------------------------------

    def test_configmap_keys_exist_and_are_used(self):
        used = set()
        for e in self.container.get("env", []):
            ref = e.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                self.assertIn(ref["name"], self.objects["ConfigMap"])
                self.assertIn(ref["key"], self.objects["ConfigMap"][ref["name"]]["data"])
                used.add((ref["name"], ref["key"]))
            self.assertIn(e["name"], self.entrypoint, f"the entrypoint does not read {e['name']}")
        for ref in self.container.get("envFrom", []):
            cm = ref.get("configMapRef", {}).get("name")
            if cm:
                self.assertIn(cm, self.objects["ConfigMap"])
                used |= {(cm, k) for k in self.objects["ConfigMap"][cm]["data"]}
        for v in self.pod["spec"].get("volumes", []):
            if "configMap" in v:
                cm = v["configMap"]["name"]
                self.assertIn(cm, self.objects["ConfigMap"])
                for item in v["configMap"].get("items", []):
                    self.assertIn(item["key"], self.objects["ConfigMap"][cm]["data"])
                used |= {(cm, k) for k in self.objects["ConfigMap"][cm]["data"]}
        for key in self.configmap["data"]:
            self.assertIn(("glossa-server", key), used, f"ConfigMap key {key} is not used")

    def test_flags_are_glossa_server_flags(self):
        self.assertTrue(self.flags, "GLOSSA_FLAGS is empty")
        for name in self.flags:
            self.assertIn(name, self.server_flags, f"--{name} is not a glossa-server flag")
        self.assertNotIn("model", self.flags, "models go in GLOSSA_MODELS")

    def test_models_are_files_in_the_image_or_on_the_models_volume(self):
        mounts = {m["mountPath"]: m["name"] for m in self.container.get("volumeMounts", [])}
        volumes = {v["name"] for v in self.pod["spec"].get("volumes", [])}
        self.assertEqual(mounts.get("/models"), "models", "the models volume at /models")
        self.assertIn("models", volumes)
        for name, path in self.models.items():
            with self.subTest(model=name):
                self.assertRegex(name, r"^[A-Za-z0-9._-]+$")
                if path.startswith("/opt/glossa/models/"):
                    self.assertTrue(os.path.exists(os.path.join(ROOT, "models", os.path.basename(path))),
                                    f"{path}: not a bundled model")
                else:
                    self.assertTrue(path.startswith("/models/"), f"{path}: not under /models")

    def test_resources_fit_the_flags(self):
        resources = self.container["resources"]
        threads = int(self.flags.get("workers") or 1) * int(self.flags.get("threads") or 1)
        self.assertIn("cpu", resources["requests"], "the HPA's CPU utilization needs a request")
        self.assertGreaterEqual(cpu_cores(resources["requests"]["cpu"]), threads,
                                "CPU request below --workers x --threads")
        self.assertIn("memory", resources["requests"])
        self.assertIn("memory", resources["limits"])

    def test_termination_outlasts_the_drain(self):
        drain = seconds(self.flags["shutdown_timeout"]) if "shutdown_timeout" in self.flags \
            else default_shutdown_timeout()
        pre_stop = 0.0
        hook = self.container.get("lifecycle", {}).get("preStop", {})
        if "exec" in hook:
            command = hook["exec"]["command"]
            self.assertEqual(command[0], "sleep")
            pre_stop = float(command[1])
        elif "sleep" in hook:
            pre_stop = float(hook["sleep"]["seconds"])
        grace = self.pod["spec"]["terminationGracePeriodSeconds"]
        self.assertGreater(grace, drain + pre_stop,
                           f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop} + "
                           f"--shutdown_timeout {drain}: draining requests would be killed")

    def test_runs_as_the_images_non_root_user(self):
        user = re.findall(r"^USER\s+(\S+)", self.dockerfile, re.M)[-1]
        uid = int(user.split(":")[0])
        self.assertNotEqual(uid, 0)
        security = self.pod["spec"]["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        self.assertEqual(security["runAsUser"], uid)
        self.assertIn(f"--uid {uid}", self.dockerfile)
        for job in self.objects["Job"].values():
            fs_group = job["spec"]["template"]["spec"].get("securityContext", {}).get("fsGroup")
            if fs_group is not None:
                self.assertEqual(fs_group, uid, f"Job {job['metadata']['name']}: fsGroup")

    # --- Autoscaling and monitoring ---------------------------------------------------------

    def test_hpa_scales_the_deployment_on_cpu_and_queue_depth(self):
        hpa = self.one("HorizontalPodAutoscaler", "glossa")
        self.assertEqual(hpa["apiVersion"], "autoscaling/v2")
        ref = hpa["spec"]["scaleTargetRef"]
        self.assertEqual((ref["kind"], ref["name"]), ("Deployment", self.deployment["metadata"]["name"]))
        self.assertLessEqual(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        metrics = hpa["spec"]["metrics"]
        self.assertIn("cpu", [m["resource"]["name"] for m in metrics if m["type"] == "Resource"])
        pods = [m["pods"]["metric"]["name"] for m in metrics if m["type"] == "Pods"]
        self.assertEqual(pods, ["glossa_queue_depth"])
        self.assertIn('"glossa_queue_depth"', read("server", "metrics", "metrics.cc"),
                      "the server does not export glossa_queue_depth")
        # prometheus-adapter serves that metric from the series the PodMonitor scrapes.
        with open(os.path.join(K8S, "prometheus-adapter-values.yaml"), encoding="utf-8") as f:
            values = yaml.safe_load(f)
        served = {}
        for rule in values["rules"]["custom"]:
            name = rule["name"].get("as") or rule["name"]["matches"].strip("^$")
            served[name] = rule
        self.assertIn("glossa_queue_depth", served)
        rule = served["glossa_queue_depth"]
        self.assertIn("glossa_queue_depth", rule["seriesQuery"])
        overrides = rule["resources"]["overrides"]
        self.assertEqual(overrides["pod"]["resource"], "pod")
        self.assertEqual(overrides["namespace"]["resource"], "namespace")
        for part in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
            self.assertIn(part, rule["metricsQuery"])

    def test_podmonitor_scrapes_the_metrics_port_as_job_glossa(self):
        monitor = self.one("PodMonitor", "glossa")
        self.assertSelects(monitor["spec"]["selector"]["matchLabels"], "PodMonitor")
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            self.assertIn(endpoint["port"], self.ports)
            self.assertEqual(endpoint.get("path", "/metrics"), "/metrics")
        jobs = set(re.findall(r'job="([^"]+)"', read("deploy", "prometheus", "alerts.yml")))
        job = self.pod_labels()[monitor["spec"]["jobLabel"]]
        self.assertEqual(jobs, {job}, "the alert rules' job label")

    # --- The batch Job ------------------------------------------------------------------------

    def test_batch_job_matches_the_server(self):
        batch_flags = absl_flags("server", "batch", "batch_main.cc") | {"help"}
        headless = next(s for s in self.objects["Service"].values()
                        if s["spec"].get("clusterIP") == "None")
        for name, job in self.objects["Job"].items():
            with self.subTest(job=name):
                pod = job["spec"]["template"]
                labels = pod.get("metadata", {}).get("labels", {})
                # The server's Services must not select the batch pods.
                self.assertFalse(all(labels.get(k) == v for k, v in
                                     headless["spec"]["selector"].items()))
                for c in pod["spec"]["containers"]:
                    self.assertEqual(c["image"], self.container["image"])
                    script = " ".join(c.get("command", []) + c.get("args", []))
                    if "glossa-batch" not in script:
                        continue
                    for flag in re.findall(r"(?<![\w-])--(\w+)", script):
                        self.assertIn(flag, batch_flags, f"--{flag} is not a glossa-batch flag")
                    server = re.search(r"--server[= ]dns:///([\w.-]+):(\d+)", script)
                    if server:
                        host = server.group(1).split(".")[0]
                        self.assertEqual(host, headless["metadata"]["name"])
                        self.assertEqual(int(server.group(2)), headless["spec"]["ports"][0]["port"])
                    model = re.search(r"--model[= ]([\w.-]+)", script)
                    if model:
                        self.assertIn(model.group(1), self.models,
                                      "the batch Job's --model is not served (GLOSSA_MODELS)")

    def test_compose_matches_the_image(self):
        compose = yaml.safe_load(read("deploy", "docker-compose.yml"))
        glossa = compose["services"]["glossa"]
        for mapping in glossa.get("ports", []):
            self.assertIn(int(str(mapping).split(":")[-1]), self.ports.values())
        # compose passes no --shutdown_timeout: the server's default.
        self.assertGreater(seconds(glossa["stop_grace_period"]), default_shutdown_timeout())


if __name__ == "__main__":
    unittest.main()
