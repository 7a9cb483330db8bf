#!/usr/bin/env bash
# Tests of the Helm chart (deploy/helm/waymark) and of deploy/compose.yaml, without a cluster or a
# container engine:
#   - helm lint, with the chart's values and with each test values file;
#   - helm template for five sets of values (the defaults with an admin key Secret; auth off; TLS
#     on top of the first; PostgreSQL with the migration hook, a ServiceMonitor and an admin key
#     Secret with its own entry name; TLS with PostgreSQL and the chart's own admin key Secret),
#     each checked by checks.py: kinds, replica count, probes (plain HTTP GETs of /readyz and
#     /healthz on the container's metrics port, never a key) against the container's and the
#     Service's ports, the Secrets' wiring, the admin key file (--admin-key-file at a read-only
#     mount of the Secret's entry), the hooks, the non-root security context, and every flag and
#     variable against what the waymark binary accepts;
#   - settings the chart must refuse (and say why), among them auth with no admin key;
#   - the checker itself: renders broken on purpose must fail it;
#   - compose.yaml, parsed and checked the same way.
#
# Installs what is missing, into .tools/: helm (go install, HELM_VERSION) and a Python venv with
# PyYAML (PYYAML_VERSION). Variables: WAYMARK_BIN (default target/release/waymark), HELM,
# SHOW_VERDICTS (non-empty: print the checker's verdict on each render broken on purpose).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BIN=${WAYMARK_BIN:-$repo/target/release/waymark}
TOOLS=$repo/.tools
HELM_VERSION=${HELM_VERSION:-v4.3.2}
HELM=${HELM:-$TOOLS/bin/helm}
PYYAML_VERSION=${PYYAML_VERSION:-6.0.3}
VENV=$TOOLS/deploy-venv
chart=$here/helm/waymark

fail() { echo "test-chart: FAIL: $*" >&2; exit 1; }
step() { echo "test-chart: $*"; }
[ -x "$BIN" ] || fail "no binary at $BIN (set WAYMARK_BIN)"

if ! "$HELM" version >/dev/null 2>&1; then
  step "installing helm $HELM_VERSION into $(dirname "$HELM") (go install; a cold build takes minutes)"
  t0=$SECONDS
  mkdir -p "$(dirname "$HELM")"
  GOBIN=$(dirname "$HELM") go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  step "helm built in $((SECONDS - t0)) s"
fi
if ! "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  step "installing PyYAML $PYYAML_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "PyYAML==$PYYAML_VERSION"
fi
PY=$VENV/bin/python

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checks() { "$PY" "$here/checks.py" "$@" --bin "$BIN"; }

# --- lint and render -------------------------------------------------------------------------
# The defaults turn auth on and name no admin key, which the chart refuses (checked below): the
# smallest values it renders with add the Secret.
with_key=(--set auth.existingSecret=waymark-admin)
"$HELM" lint --strict "$chart" "${with_key[@]}" >"$work/lint.out" 2>&1 || { cat "$work/lint.out" >&2; fail "helm lint (default values + ${with_key[*]})"; }
for v in "$here"/helm/test-values/*.yaml; do
  "$HELM" lint --strict "$chart" -f "$v" >"$work/lint.out" 2>&1 || { cat "$work/lint.out" >&2; fail "helm lint -f $v"; }
done
step "helm lint --strict: default values + ${with_key[*]}, and $(ls "$here"/helm/test-values/*.yaml | wc -l) test values files"

render() { # SCENARIO [helm args…]
  local s=$1; shift
  "$HELM" template wm "$chart" --namespace waymark "$@" >"$work/$s.yaml" 2>"$work/$s.err" ||
    { cat "$work/$s.err" >&2; fail "helm template ($s)"; }
}
render default "${with_key[@]}"
render full -f "$here/helm/test-values/full.yaml"
render tls -f "$here/helm/test-values/tls.yaml"
render open --set auth.enabled=false
render tls-defaults "${with_key[@]}" --set tls.secretName=waymark-tls
for s in default open tls-defaults full tls; do
  checks chart "$s" "$work/$s.yaml" --cargo "$repo/Cargo.toml"
done

# --- settings the chart refuses --------------------------------------------------------------
refuses() { # MESSAGE-PART… -- helm args…
  local want=()
  while [ "$1" != -- ]; do want+=("$1"); shift; done; shift
  if "$HELM" template wm "$chart" "$@" >/dev/null 2>"$work/refused.err"; then
    fail "helm template $* rendered; it must refuse"
  fi
  for w in "${want[@]}"; do
    grep -qF -- "$w" "$work/refused.err" || { cat "$work/refused.err" >&2; fail "helm template $* refused without saying '$w'"; }
  done
}
refuses "replicaCount > 1 needs PostgreSQL" -- "${with_key[@]}" --set replicaCount=2
refuses "migration.enabled needs PostgreSQL" -- "${with_key[@]}" --set migration.enabled=true
# Auth on and no admin key, whether or not a ServiceMonitor wants one: the message names both
# ways to give one, and how to make the Secret.
no_key="auth.enabled needs an admin key"
refuses "$no_key" "auth.existingSecret" "auth.adminKey" "waymark key generate" --
refuses "$no_key" -- --set tls.secretName=waymark-tls --set serviceMonitor.enabled=true
refuses "auth.adminKey is not an API key" -- --set auth.adminKey=wm_admin_key_for_tests
refuses "both set" -- "${with_key[@]}" --set auth.adminKey="$("$BIN" key generate)"
refuses "auth.existingSecret needs auth.existingSecretKey" -- "${with_key[@]}" --set auth.existingSecretKey=
step "refused: replicas or migration on SQLite; auth without an admin key; a malformed auth.adminKey; two key sources; no entry name"

# --- the checker catches broken renders ------------------------------------------------------
broken_count=0
broken() { # WHAT SED-EXPRESSION SCENARIO
  sed "$2" "$work/$3.yaml" >"$work/broken.yaml"
  cmp -s "$work/broken.yaml" "$work/$3.yaml" && fail "the mutation '$1' changed nothing"
  if checks chart "$3" "$work/broken.yaml" --cargo "$repo/Cargo.toml" >/dev/null 2>"$work/broken.err"; then
    fail "the checker passed a render with $1"
  fi
  # A verdict, not a crash (a mutation that broke the YAML would prove nothing).
  grep -q "^FAIL chart ($3): " "$work/broken.err" || { cat "$work/broken.err" >&2; fail "the checker crashed on the render with $1"; }
  [ -z "${SHOW_VERDICTS:-}" ] || { echo "== $1 ($3)"; cat "$work/broken.err"; }
  broken_count=$((broken_count + 1))
}
broken "readiness on /ready" 's#path: /readyz#path: /ready#' full
broken "readiness on the gRPC port" '/readinessProbe:/,/port:/ s#port: metrics#port: grpc#' tls
broken "readiness over HTTPS" 's#path: /readyz#path: /readyz\n              scheme: HTTPS#' tls-defaults
broken "readiness on the gRPC health service" '/readinessProbe:/,/port: metrics/ { s#httpGet:#grpc:#; /path: \/readyz/d; s#port: metrics#port: 7450# }' default
broken "a key sent to /readyz" 's#path: /readyz#path: /readyz\n              httpHeaders: [{name: Authorization, value: Bearer x}]#' full
broken "a key sent to /healthz" 's#path: /healthz#path: /healthz\n              httpHeaders: [{name: Authorization, value: Bearer x}]#' open
broken "liveness on the gRPC port" '/livenessProbe:/,/port:/ s#port: metrics#port: grpc#' full
broken "2 replicas instead of 3" 's#replicas: 3#replicas: 2#' full
broken "runAsNonRoot false" 's#runAsNonRoot: true#runAsNonRoot: false#' default
broken "a flag the server lacks" 's#- --insecure#- --insecure-mode#' default
broken "the Job hook only on install" 's#helm.sh/hook: pre-install,pre-upgrade#helm.sh/hook: pre-install#' full
broken "the admin key from another Secret" 's#name: waymark-ops-key#name: other-key#' full
broken "the metrics port moved" 's#"0.0.0.0:9464"#"0.0.0.0:9465"#' tls
# The admin key file.
broken "--admin-key-file where nothing is mounted" 's#- /etc/waymark/admin/admin.key#- /etc/waymark/admin.key#' default
broken "--admin-key-file under the TLS mount" 's#- /etc/waymark/admin/admin.key#- /etc/waymark/tls/admin.key#' tls
broken "no --admin-key-file" '/- --admin-key-file/{N;d}' full
broken "--init-admin-key-file instead (a flag the server has)" 's#- --admin-key-file#- --init-admin-key-file#' tls-defaults
broken "--admin-key-file misspelt" 's#- --admin-key-file#- --admin-keyfile#' default
broken "the key file's variable misspelt" '/- --admin-key-file/{N;d}; s#^            - name: WAYMARK_AUTH$#            - name: WAYMARK_ADMIN_KEYFILE\n              value: /etc/waymark/admin/admin.key\n&#' default
broken "the admin key mount dropped" '/^            - name: admin-key$/,/readOnly: true/d' full
broken "the admin key mounted writable" '/mountPath: \/etc\/waymark\/admin$/{n;s#readOnly: true#readOnly: false#}' tls
broken "the key file from another Secret" 's#secretName: waymark-admin$#secretName: waymark-other#' tls-defaults
broken "the key file from another entry of the Secret" 's#- key: "key"#- key: "admin.key"#' full
broken "the chart's Secret holding the key under another entry" 's#^  admin.key: "wmk_#  admin-key: "wmk_#' tls
broken "the chart's Secret holding no API key" 's#^  admin.key: "wmk_#  admin.key: "wm_#' tls
broken "no fsGroup, so the 0440 key file is root's alone" '/fsGroup: 10001/d' default
step "the checker fails $broken_count renders broken on purpose"
# And passes the same key file given by the server's variable instead of its flag.
sed '/- --admin-key-file/{N;d}; s#^            - name: WAYMARK_AUTH$#            - name: WAYMARK_ADMIN_KEY_FILE\n              value: /etc/waymark/admin/admin.key\n&#' \
  "$work/default.yaml" >"$work/variable.yaml"
grep -q 'name: WAYMARK_ADMIN_KEY_FILE' "$work/variable.yaml" && ! grep -q -- '- --admin-key-file' "$work/variable.yaml" ||
  fail "the rewrite to WAYMARK_ADMIN_KEY_FILE did not take"
checks chart default "$work/variable.yaml" --cargo "$repo/Cargo.toml" >/dev/null ||
  fail "the checker refused the admin key file given as WAYMARK_ADMIN_KEY_FILE"
step "the checker passes the key file given as WAYMARK_ADMIN_KEY_FILE"

# --- compose ---------------------------------------------------------------------------------
checks compose "$here/compose.yaml"
sed 's#"--no-migrate",#"--no-migrate", "--worker-leases", "15s",#' "$here/compose.yaml" >"$work/compose-broken.yaml"
if checks compose "$work/compose-broken.yaml" >/dev/null 2>&1; then
  fail "the compose checker passed a flag the server lacks (--worker-leases)"
fi
sed 's#condition: service_healthy#condition: service_started#' "$here/compose.yaml" >"$work/compose-broken.yaml"
if checks compose "$work/compose-broken.yaml" >/dev/null 2>&1; then
  fail "the compose checker passed a migration that does not wait for a healthy database"
fi
step "PASS ($SECONDS s)"
