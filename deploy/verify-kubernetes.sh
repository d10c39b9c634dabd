#!/usr/bin/env bash
# Checks the Kubernetes manifests (deploy/kubernetes/) without a cluster, in the test command
# (tests/run-all.sh). What it proves:
# - the base and the production overlay render with `kubectl kustomize`;
# - every object they render is valid for Kubernetes 1.32 (`kubernetes-validate --strict`,
#   the API's own OpenAPI schemas: a misspelt or unknown field fails, not just a wrong type), and
#   a manifest broken on purpose fails that same check (a negative control);
# - the Deployment probes /readyz (readiness) and /healthz (liveness) on the API's port, exposes
#   the admin listener on 0.0.0.0 at the port Prometheus is told to scrape, gives the drain its
#   time (terminationGracePeriodSeconds longer than the preStop sleep plus
#   SHUTDOWN_GRACE_SECONDS plus SHUTDOWN_DEADLINE_SECONDS), and the Job runs `backend migrate`;
# - with components/bank-callbacks added as its header says: valid too, its Ingress routes
#   exactly /bank/callbacks to the admin port, the callback secret is in the mounted Secret, and
#   the admin port admits the scraper and the ingress controller only.
# It does not prove the pods start: that needs a cluster (deploy/verify-container.sh runs the
# same image with podman). The overlay's Secret files are not in the repository; the rendering
# here uses development placeholders written into a temporary copy.
# Installs what is missing: kubectl (Debian's `kubectl`, else `kubernetes-client`) and
# kubernetes-validate (PyPI). Takes about 5 s once they are installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBERNETES_VERSION=1.32.0
KUBERNETES_VALIDATE=1.37.0

if ! command -v kubectl >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq kubectl || apt-get install -y -qq kubernetes-client
fi
# The kustomization files use `labels:` and `replicas:`, which the kustomize inside kubectl
# 1.27 (kustomize v5) and later reads.
kubectl version --client 2>/dev/null | grep -Eq 'Kustomize Version: v[5-9]' \
  || { kubectl version --client >&2; echo "kubectl's kustomize is older than v5" >&2; exit 1; }
if ! command -v kubernetes-validate >/dev/null; then
  python3 -m pip install --quiet "kubernetes-validate==$KUBERNETES_VALIDATE"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r deploy/kubernetes "$work/"
overlay="$work/kubernetes/overlays/production"
# Each Secret file the overlay names, as a clearly fake value where the operator's is missing.
for file in $(grep -o 'secrets/[a-z-]*' "$overlay/kustomization.yaml" | sort -u); do
  [ -e "$overlay/$file" ] || printf 'development-placeholder-not-a-secret-%s' "${file#secrets/}" >"$overlay/$file"
done

validate() {
  timeout 60 kubernetes-validate --kubernetes-version "$KUBERNETES_VERSION" --strict --quiet "$@"
}

for name in base overlays/production; do
  echo "rendering and validating $name"
  timeout 60 kubectl kustomize "$work/kubernetes/$name" >"$work/rendered.yaml"
  validate "$work/rendered.yaml"
done

# The negative control: a field Kubernetes does not know must fail the validation above.
sed 's/^  replicas: 3$/  replica: 3/' "$work/rendered.yaml" >"$work/broken.yaml"
grep -q '^  replica: 3$' "$work/broken.yaml" || { echo "the broken copy was not made" >&2; exit 1; }
if validate "$work/broken.yaml" >/dev/null 2>&1; then
  echo "kubernetes-validate accepted a Deployment with an unknown field" >&2
  exit 1
fi

# What the schemas cannot say: the probes, the admin port and the drain's time (the overlay).
python3 - "$work/rendered.yaml" <<'PY'
import sys, yaml
objects = {o["kind"]: o for o in yaml.safe_load_all(open(sys.argv[1])) if o}
pod = objects["Deployment"]["spec"]["template"]
config = objects["ConfigMap"]["data"]
backend = pod["spec"]["containers"][0]
ports = {p["name"]: p["containerPort"] for p in backend["ports"]}

def check(ok, what):
    if not ok:
        sys.exit(f"deploy/kubernetes: {what}")

for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
    get = backend[probe]["httpGet"]
    check(get["path"] == path and get["port"] == "http", f"{probe} is not GET {path} on http")
check(config["LISTEN_ADDR"] == f"0.0.0.0:{ports['http']}", "LISTEN_ADDR is not the http port")
check(config["ADMIN_ADDR"] == f"0.0.0.0:{ports['admin']}", "ADMIN_ADDR is not 0.0.0.0:<admin port>")
notes = pod["metadata"]["annotations"]
check(notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
      and notes["prometheus.io/port"] == str(ports["admin"]), "the scrape annotations miss /metrics")
stop = (backend["lifecycle"]["preStop"]["sleep"]["seconds"]
        + int(config["SHUTDOWN_GRACE_SECONDS"]) + int(config["SHUTDOWN_DEADLINE_SECONDS"]))
check(pod["spec"]["terminationGracePeriodSeconds"] > stop,
      f"terminationGracePeriodSeconds is not longer than the {stop} s stop")
check(objects["Job"]["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"],
      "the Job does not run `backend migrate`")
print(f"probes, admin port and drain checked ({stop} s stop, "
      f"{pod['spec']['terminationGracePeriodSeconds']} s grace period)")
PY

# The bank-callbacks component on top of production, as its header tells an operator to add it.
mkdir -p "$work/kubernetes/overlays/with-callbacks/secrets"
printf 'development-placeholder-not-a-secret-bank-callback' \
  >"$work/kubernetes/overlays/with-callbacks/secrets/bank-callback-secret"
cat >"$work/kubernetes/overlays/with-callbacks/kustomization.yaml" <<'YAML'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: payments
resources:
  - ../production
components:
  - ../../components/bank-callbacks
secretGenerator:
  - name: payments-backend-secrets
    behavior: merge
    files:
      - bank-callback-secret=secrets/bank-callback-secret
YAML
echo "rendering and validating overlays/production with components/bank-callbacks"
timeout 60 kubectl kustomize "$work/kubernetes/overlays/with-callbacks" >"$work/with-callbacks.yaml"
validate "$work/with-callbacks.yaml"
python3 - "$work/with-callbacks.yaml" <<'PY'
import sys, yaml
objects = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
named = {(o["kind"], o["metadata"]["name"]): o for o in objects}
kinds = lambda kind: [o for o in objects if o["kind"] == kind]

def check(ok, what):
    if not ok:
        sys.exit(f"deploy/kubernetes/components/bank-callbacks: {what}")

(ingress,) = kinds("Ingress")
(rule,) = ingress["spec"]["rules"]
(path,) = rule["http"]["paths"]
check((path["path"], path["pathType"]) == ("/bank/callbacks", "Exact"),
      "the Ingress routes more than exactly /bank/callbacks")
service = named[("Service", path["backend"]["service"]["name"])]
(port,) = service["spec"]["ports"]
check(port["targetPort"] == "admin", "the callbacks' Service is not the admin port")
(config,) = kinds("ConfigMap")
(secret,) = kinds("Secret")
mounted = config["data"]["BANK_CALLBACK_SECRET_FILE"]
check(mounted == "/run/secrets/payments/bank-callback-secret", f"the secret file is {mounted}")
check("bank-callback-secret" in secret["data"], "the Secret has no bank-callback-secret")
volumes = named[("Deployment", "payments-backend")]["spec"]["template"]["spec"]["volumes"]
check(any(v.get("secret", {}).get("secretName") == secret["metadata"]["name"] for v in volumes),
      "the Deployment does not mount the Secret that holds the callback secret")
sources = [rule["from"] for p in kinds("NetworkPolicy") for rule in p["spec"]["ingress"]
           if any(q["port"] == "admin" for q in rule.get("ports", []))]
check(all(sources) and len(sources) == 2,
      "the admin port is open to more than the scraper and the ingress controller")
print("bank callbacks: one exact path to the admin port, its secret mounted, two sources allowed")
PY

echo "deploy/kubernetes: base and production overlay valid for Kubernetes $KUBERNETES_VERSION (in ${SECONDS} s)"
