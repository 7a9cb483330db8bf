#!/usr/bin/env python3
"""Checks of deploy/compose.yaml and of the Helm chart's rendered objects, against each other
and against what the waymark binary accepts (its --help output).

    checks.py compose FILE --bin WAYMARK
    checks.py chart SCENARIO RENDERED.yaml --bin WAYMARK --cargo Cargo.toml

Every failure is printed with what was expected; the exit code is 1 if any.
"""

import argparse
import hashlib
import os
import re
import subprocess
import sys

import yaml

failures = []
notes = []


def check(cond, message):
    if not cond:
        failures.append(message)
    return bool(cond)


def finish(what):
    for n in notes:
        print(f"  {n}")
    if failures:
        for f in failures:
            print(f"FAIL {what}: {f}", file=sys.stderr)
        sys.exit(1)
    print(f"ok {what}")


class Cli:
    """What the binary accepts, read from its help."""

    def __init__(self, binary):
        self.binary = binary
        top = self.help()
        section = top.split("Commands:", 1)[1].split("Options:", 1)[0]
        self.subcommands = set(re.findall(r"(?m)^  ([a-z][a-z-]*) ", section))
        server = self.help("server")
        self.server_flags = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)", server))
        self.server_env = set(re.findall(r"\[env: ([A-Z0-9_]+)=", server))
        # Variables the CLI reads (WAYMARK_SERVER, WAYMARK_API_KEY, …), from a client command.
        self.client_env = set(re.findall(r"`(WAYMARK_[A-Z_]+)", self.help("queue", "list")))
        self.migrate_flags = self.flags("migrate")
        self.health_flags = self.flags("health")

    def flags(self, command):
        check(command in self.subcommands, f"the binary has no `{command}` subcommand")
        if command not in self.subcommands:
            return set()
        return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)", self.help(command)))

    def help(self, *args):
        out = subprocess.run([self.binary, *args, "--help"], capture_output=True, text=True, check=True)
        return out.stdout

    def check_server_args(self, args, where):
        check(args and args[0] == "server", f"{where}: the command is {args[:1]}, not server")
        for a in args[1:]:
            if not a.startswith("--"):
                continue
            flag = a.split("=", 1)[0]
            check(flag in self.server_flags, f"{where}: `waymark server` does not accept {flag}")

    def check_migrate_args(self, args, where):
        check(args and args[0] == "migrate", f"{where}: the command is {args[:1]}, not migrate")
        for a in args[1:]:
            if a.startswith("--"):
                check(a.split("=", 1)[0] in self.migrate_flags, f"{where}: `waymark migrate` does not accept {a}")

    def check_health_args(self, args, where):
        check(args[:2] == ["waymark", "health"], f"{where}: the health check runs {args[:2]}, not waymark health")
        for a in args[2:]:
            if a.startswith("--"):
                check(a.split("=", 1)[0] in self.health_flags, f"{where}: `waymark health` does not accept {a}")
        check("--ready" in args, f"{where}: the health check asks liveness, not readiness (--ready)")

    def check_env(self, names, where):
        known = self.server_env | self.client_env
        for n in names:
            if n.startswith("WAYMARK_"):
                check(n in known, f"{where}: the binary reads no variable {n}")


def interpolate(value):
    """Compose's ${VAR:-default} and ${VAR}, from the environment or the default."""
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}", lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


def port_of(addr):
    return int(str(addr).rsplit(":", 1)[1])


# --- compose ---------------------------------------------------------------------------------

def check_compose(path, cli):
    with open(path) as f:
        doc = interpolate(yaml.safe_load(f))
    services = doc.get("services", {})
    for name in ("postgres", "migrate", "waymark-1", "waymark-2"):
        check(name in services, f"no service {name}")
    if failures:
        return
    pg = services["postgres"]
    check(str(pg.get("image", "")).startswith("postgres:"), f"postgres image is {pg.get('image')}")
    check(any(str(v).endswith(":/var/lib/postgresql/data") for v in pg.get("volumes", [])),
          "postgres keeps no volume at /var/lib/postgresql/data")
    hc = pg.get("healthcheck", {})
    check("pg_isready" in hc.get("test", []), f"postgres health check is {hc.get('test')}, not pg_isready")
    pg_env = pg.get("environment", {})
    db_url = f"postgres://{pg_env.get('POSTGRES_USER')}:{pg_env.get('POSTGRES_PASSWORD')}@postgres:5432/{pg_env.get('POSTGRES_DB')}"
    named_volumes = set((doc.get("volumes") or {}).keys())
    for svc in services.values():
        for v in svc.get("volumes", []):
            src = str(v).split(":", 1)[0]
            if not src.startswith((".", "/")):
                check(src in named_volumes, f"volume {src} is used but not declared")

    image = services["waymark-1"].get("image")
    check(image and "waymark" in image, f"waymark-1 image is {image}")

    mig = services["migrate"]
    check(mig.get("image") == image, "migrate does not run the replicas' image")
    cmd = mig.get("command", [])
    cli.check_migrate_args(cmd, "migrate")
    check("--database-url" in cmd and cmd[cmd.index("--database-url") + 1] == db_url,
          f"migrate's --database-url is not {db_url}")
    check(mig.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy",
          "migrate does not wait for postgres to be healthy")
    check(str(mig.get("restart")) == "no", f"migrate restarts ({mig.get('restart')}): a one-shot must not")

    published = {}
    for name in ("waymark-1", "waymark-2"):
        s = services[name]
        check(s.get("image") == image, f"{name} runs {s.get('image')}, not {image}")
        cmd = s.get("command", [])
        cli.check_server_args(cmd, name)
        check("--no-migrate" in cmd, f"{name} does not start with --no-migrate")
        test = (s.get("healthcheck") or {}).get("test", [])
        check(test[:1] == ["CMD"], f"{name} has no exec-form health check: {test}")
        cli.check_health_args(test[1:], name)
        env = s.get("environment", {})
        cli.check_env(env.keys(), name)
        check(env.get("WAYMARK_DATABASE_URL") == db_url, f"{name} database is {env.get('WAYMARK_DATABASE_URL')}, not {db_url}")
        check(str(env.get("WAYMARK_AUTH")).lower() == "true", f"{name} does not turn --auth on")
        # Beyond loopback the server needs keys and TLS: the certificate must be mounted where
        # the command reads it.
        cert = cmd[cmd.index("--tls-cert") + 1] if "--tls-cert" in cmd else None
        check(cert or "--insecure" in cmd, f"{name} listens beyond loopback with neither TLS nor --insecure")
        if cert:
            mounts = [str(v).split(":")[1] for v in s.get("volumes", [])]
            check(any(cert.startswith(m.rstrip("/") + "/") for m in mounts), f"{name}: nothing mounted where {cert} is")
        deps = s.get("depends_on", {})
        check(deps.get("migrate", {}).get("condition") == "service_completed_successfully",
              f"{name} does not wait for migrate to complete")
        inside = {port_of(env.get(k)) for k in ("WAYMARK_LISTEN", "WAYMARK_CONSOLE_LISTEN", "WAYMARK_METRICS_LISTEN")}
        for k in ("WAYMARK_LISTEN", "WAYMARK_CONSOLE_LISTEN", "WAYMARK_METRICS_LISTEN"):
            check(str(env.get(k, "")).startswith("0.0.0.0:"), f"{name}: {k} is {env.get(k)}, not on every address")
        targets = set()
        for p in s.get("ports", []):
            parts = str(p).split(":")
            host, target = int(parts[-2]), int(parts[-1])
            targets.add(target)
            check(host not in published, f"{name} publishes host port {host}, as {published.get(host)} does")
            published[host] = name
        check(targets == inside, f"{name} publishes {sorted(targets)}, listens on {sorted(inside)}")
    key_files = [s for s in ("waymark-1", "waymark-2") if "--init-admin-key-file" in services[s].get("command", [])]
    check(len(key_files) == 1, f"{len(key_files)} replicas make the first admin key, not one")


# --- chart -----------------------------------------------------------------------------------

# What each render must hold. Whatever auth and TLS say, the probes are the same: plain HTTP GETs
# of /readyz and /healthz on the metrics port, without a key. auth_secret: the Secret and entry
# of the admin key, mounted read-only and named by --admin-key-file (or WAYMARK_ADMIN_KEY_FILE);
# the chart refuses auth without one.
SCENARIOS = {
    # The chart's own values plus the one it needs, --set auth.existingSecret=waymark-admin: auth
    # on, no TLS, SQLite, the Secret's default entry.
    "default": dict(replicas=1, postgres=False, migration=False, monitor=False, tls=False,
                    auth_secret=("waymark-admin", "admin.key")),
    # The chart's own values with --set auth.enabled=false: no key at all.
    "open": dict(replicas=1, postgres=False, migration=False, monitor=False, tls=False,
                 auth_secret=None, auth=False),
    # "default" with --set tls.secretName=waymark-tls.
    "tls-defaults": dict(replicas=1, postgres=False, migration=False, monitor=False, tls="waymark-tls",
                         auth_secret=("waymark-admin", "admin.key")),
    # deploy/helm/test-values/full.yaml: an existing Secret with its own entry name.
    "full": dict(replicas=3, postgres=True, migration=True, monitor=True, tls=False,
                 auth_secret=("waymark-ops-key", "key")),
    # deploy/helm/test-values/tls.yaml: the chart's Secret, from auth.adminKey.
    "tls": dict(replicas=2, postgres=True, migration=False, monitor=False, tls="waymark-tls",
                auth_secret=("wm-waymark-admin-key", "admin.key"),
                auth_secret_made="wmk_c472ad4de175a482_a416e38836fec3b574d999df0ecf44e797b9e22118b8dbbcaae25ef197cea8be",
                db_secret=("pg-credentials", "url")),
}

# What `waymark key generate` prints, and the server's flag and variable that register it.
API_KEY = re.compile(r"^wmk_[0-9a-f]{16}_[0-9a-f]{64}$")
ADMIN_KEY_FLAG, ADMIN_KEY_VAR = "--admin-key-file", "WAYMARK_ADMIN_KEY_FILE"
INIT_KEY_FLAG, INIT_KEY_VAR = "--init-admin-key-file", "WAYMARK_INIT_ADMIN_KEY_FILE"

PROBES = ("readinessProbe", "livenessProbe", "startupProbe")
HANDLERS = ("httpGet", "grpc", "exec", "tcpSocket")


def cargo_version(path):
    text = open(path).read()
    section = text.split("[workspace.package]", 1)[1].split("\n[", 1)[0]
    return re.search(r'(?m)^version\s*=\s*"([^"]+)"', section).group(1)


def env_map(container):
    return {e["name"]: e for e in container.get("env", [])}


def flag_values(args, flag):
    """Every value given to FLAG in ARGS, as `FLAG VALUE` or `FLAG=VALUE`."""
    out = []
    for i, a in enumerate(args):
        if a == flag:
            out.append(args[i + 1] if i + 1 < len(args) else "")
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


def check_admin_key(want, template, c, args, env, secrets, cli):
    """The admin key reaches every replica as a file: the Secret's entry, in a read-only volume
    the server's user can read, at the path --admin-key-file (or its variable) names."""
    pod = template["spec"]
    flagged = flag_values(args, ADMIN_KEY_FLAG)
    var = env.get(ADMIN_KEY_VAR)
    # Each replica would make a key of its own in its own volume: not for a Deployment.
    check(not flag_values(args, INIT_KEY_FLAG) and INIT_KEY_VAR not in env,
          f"the server is started with {INIT_KEY_FLAG} (or {INIT_KEY_VAR}): each replica would make its own key")
    if not want["auth_secret"]:
        check(not flagged and var is None, f"{ADMIN_KEY_FLAG} {flagged} or {ADMIN_KEY_VAR} without an admin key configured")
        return
    name, entry = want["auth_secret"]
    paths = flagged + ([var.get("value")] if var is not None else [])
    if not check(len(paths) == 1, f"the admin key file is given {len(paths)} times ({ADMIN_KEY_FLAG} {flagged}, "
                                  f"{ADMIN_KEY_VAR} {var}), not once"):
        return
    if flagged:
        check(ADMIN_KEY_FLAG in cli.server_flags, f"`waymark server --help` lists no {ADMIN_KEY_FLAG}")
    else:
        check(ADMIN_KEY_VAR in cli.server_env, f"`waymark server --help` lists no variable {ADMIN_KEY_VAR}")
    path = paths[0]
    if not check(isinstance(path, str) and path.startswith("/"), f"the admin key file is {path!r}, not an absolute path"):
        return
    # The mount the path is under (the deepest), and the file's name inside the volume.
    found = None
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if m.get("subPath"):
            if path == mp:
                found = (m, m["subPath"])
        elif path.startswith(mp + "/") and (found is None or len(mp) > len(found[0]["mountPath"].rstrip("/"))):
            found = (m, path[len(mp) + 1:])
    if not check(found, f"nothing is mounted where {ADMIN_KEY_FLAG} {path} is"):
        return
    mount, inside = found
    check(mount.get("readOnly") is True, f"the admin key's volume {mount['name']} is mounted writable at {mount['mountPath']}")
    volume = {v["name"]: v for v in pod.get("volumes", [])}.get(mount["name"], {})
    sv = volume.get("secret")
    if not check(sv, f"{path} is in volume {mount['name']}, which is no Secret: {volume}"):
        return
    check(sv.get("secretName") == name, f"{path} comes from Secret {sv.get('secretName')}, not {name}")
    items = sv.get("items")
    if items:
        item = next((i for i in items if i.get("path") == inside), None)
        if not check(item, f"Secret volume {mount['name']} maps no entry to {inside} ({path}): items {items}"):
            return
        key, mode = item.get("key"), item.get("mode", sv.get("defaultMode", 0o644))
    else:
        key, mode = inside, sv.get("defaultMode", 0o644)
    check(key == entry, f"{path} is entry {key!r} of Secret {name}, not {entry!r}")
    # Secret files belong to root; with an fsGroup the kubelet gives that group (which the
    # server's user is in) read access, else only the mode's bits for others apply.
    psc = pod.get("securityContext", {})
    check(mode & 0o004 or psc.get("fsGroup") is not None or psc.get("runAsUser") == 0,
          f"{path} (mode {mode:o}, root's, no fsGroup) is unreadable by uid {psc.get('runAsUser')}")
    made = want.get("auth_secret_made")
    if made:
        data = secrets.get(name, {}).get("stringData", {})
        check(data.get(entry) == made, f"the chart's Secret {name} holds {sorted(data)}, not the key at entry {entry}")
        check(API_KEY.match(str(data.get(entry, ""))), f"Secret {name} entry {entry} is no API key (wmk_<16 hex>_<64 hex>)")
        ann = (template.get("metadata") or {}).get("annotations") or {}
        check(ann.get("checksum/admin-key") == hashlib.sha256(made.encode()).hexdigest(),
              "the pods carry no checksum/admin-key of auth.adminKey: a new key would not restart them")


def check_chart(scenario, rendered, cli, cargo):
    want = SCENARIOS[scenario]
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    kinds = set(by_kind)
    expected = {"Deployment", "Service"}
    if not want["postgres"]:
        expected.add("PersistentVolumeClaim")
    if want["migration"]:
        expected.add("Job")
    if want["monitor"]:
        expected.add("ServiceMonitor")
    check(expected <= kinds, f"kinds {sorted(kinds)} lack {sorted(expected - kinds)}")
    for k, optional in (("Job", want["migration"]), ("ServiceMonitor", want["monitor"])):
        if not optional:
            check(k not in kinds, f"a {k} is rendered though it is off")
    if failures:
        return
    version = cargo_version(cargo)

    dep = by_kind["Deployment"][0]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    check(spec["replicas"] == want["replicas"], f"replicas {spec['replicas']}, not {want['replicas']}")
    labels = spec["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
          "the Deployment's selector does not match its pods")
    c = pod["containers"][0]
    check(c["image"].endswith(f":{version}"), f"image {c['image']} is not tagged {version} (Cargo.toml)")
    args = c.get("args", [])
    cli.check_server_args(args, "Deployment")
    env = env_map(c)
    cli.check_env(env.keys(), "Deployment")

    # Ports: each listen address's port is a named container port, and the Service's.
    cports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for name, var in (("grpc", "WAYMARK_LISTEN"), ("console", "WAYMARK_CONSOLE_LISTEN"), ("metrics", "WAYMARK_METRICS_LISTEN")):
        addr = env.get(var, {}).get("value", "")
        check(addr.startswith("0.0.0.0:"), f"{var} is {addr!r}, not on every address")
        if check(name in cports, f"no container port named {name}"):
            check(port_of(addr) == cports[name], f"{var} listens on {addr}, the container port {name} is {cports[name]}")
    svc = by_kind["Service"][0]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "the Service's selector does not match the pods")
    sports = {p["name"]: p for p in svc["spec"]["ports"]}
    for name in ("grpc", "console", "metrics"):
        if check(name in sports, f"the Service has no {name} port"):
            check(sports[name]["targetPort"] in cports, f"Service port {name} targets {sports[name]['targetPort']}, no such container port")
            check(sports[name]["port"] == cports[name], f"Service port {name} is {sports[name]['port']}, the server's {cports[name]}")

    # Probes: GET on the ops listener (the metrics port), which is plain HTTP whatever auth and
    # TLS say and needs no key for /healthz and /readyz.
    def resolve(port):
        return cports.get(port, port)

    for kind, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = c.get(kind) or {}
        handlers = sorted(h for h in HANDLERS if h in probe)
        g = probe.get("httpGet") or {}
        check(handlers == ["httpGet"], f"{kind} uses {handlers or 'nothing'}, not httpGet alone: {probe}")
        check(g.get("path") == path and resolve(g.get("port")) == cports.get("metrics"),
              f"{kind} is {g}, not GET {path} on the metrics port ({cports.get('metrics')})")
        check(str(g.get("scheme", "HTTP")).upper() == "HTTP",
              f"{kind} asks over {g.get('scheme')}: the metrics port speaks plain HTTP")
    # No key in any probe of any pod the chart makes.
    for d in docs:
        tmpl = (d.get("spec") or {}).get("template") or {}
        for pc in (tmpl.get("spec") or {}).get("containers", []) + (tmpl.get("spec") or {}).get("initContainers", []):
            for kind in PROBES:
                headers = ((pc.get(kind) or {}).get("httpGet") or {}).get("httpHeaders")
                check(not headers, f"{d['kind']} container {pc.get('name')}: {kind} sends headers {headers}; it needs no key")

    # Security context and resources.
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, "the pod does not set runAsNonRoot")
    check(psc.get("runAsUser") == 10001 and psc.get("runAsGroup") == 10001, f"the pod runs as {psc.get('runAsUser')}:{psc.get('runAsGroup')}, not the image's 10001")
    check(csc.get("allowPrivilegeEscalation") is False, "privilege escalation is allowed")
    check("ALL" in csc.get("capabilities", {}).get("drop", []), "capabilities are not all dropped")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    if csc.get("readOnlyRootFilesystem"):
        check("/tmp" in mounts and "/data" in mounts, "a read-only root needs /tmp and /data mounted")
    res = c.get("resources", {})
    check(res.get("requests", {}).get("memory") and res.get("limits", {}).get("memory"), f"resources are {res}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    # TLS: the certificate is read from the mounted Secret, or --insecure says there is none.
    if want["tls"]:
        check("--insecure" not in args, "--insecure with TLS on")
        cert = args[args.index("--tls-cert") + 1] if "--tls-cert" in args else ""
        mount = next((m for m in mounts if cert.startswith(m + "/")), None)
        if check(mount, f"--tls-cert {cert!r} is not under a mounted volume"):
            check(volumes[mounts[mount]].get("secret", {}).get("secretName") == want["tls"],
                  f"the certificate's volume is not Secret {want['tls']}")
        check(env.get("WAYMARK_SERVER", {}).get("value", "").startswith("https://"), "the pod's CLI does not use https")
    else:
        check("--insecure" in args and "--tls-cert" not in args, f"without TLS the server needs --insecure: args {args}")

    # Database: SQLite in the claim, or the URL from a Secret.
    db = env.get("WAYMARK_DATABASE_URL", {})
    secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}
    if want["postgres"]:
        ref = db.get("valueFrom", {}).get("secretKeyRef", {})
        if "db_secret" in want:
            check((ref.get("name"), ref.get("key")) == want["db_secret"], f"database URL from {ref}, not {want['db_secret']}")
            check(ref.get("name") not in secrets, "the chart renders the database Secret it was told exists")
        elif check(ref.get("name") in secrets, f"the database URL's Secret {ref.get('name')} is not rendered"):
            data = secrets[ref["name"]].get("stringData", {})
            check(str(data.get(ref.get("key"), "")).startswith("postgres://"), "the database Secret holds no postgres:// URL")
        check(spec.get("strategy", {}).get("type") != "Recreate", "PostgreSQL replicas need no Recreate strategy")
    else:
        check(db.get("value", "").startswith("sqlite:/data/"), f"database is {db}, not SQLite under /data")
        claim = volumes.get(mounts.get("/data"), {}).get("persistentVolumeClaim", {}).get("claimName")
        check(claim == by_kind["PersistentVolumeClaim"][0]["metadata"]["name"], "/data is not the rendered claim")
        check(spec.get("strategy", {}).get("type") == "Recreate", "a SQLite replica must stop before the next opens the file")

    # The admin key: from the Secret named, into WAYMARK_API_KEY.
    key = env.get("WAYMARK_API_KEY", {}).get("valueFrom", {}).get("secretKeyRef", {})
    if want["auth_secret"]:
        check((key.get("name"), key.get("key")) == want["auth_secret"], f"WAYMARK_API_KEY comes from {key}, not {want['auth_secret']}")
        made = secrets.get(want["auth_secret"][0])
        if want.get("auth_secret_made"):
            check(made and made.get("stringData", {}).get(want["auth_secret"][1]) == want["auth_secret_made"],
                  "the chart did not make the admin key's Secret from auth.adminKey")
        else:
            check(made is None, "the chart renders the admin key Secret it was told exists (existingSecret)")
    else:
        check(not key, f"WAYMARK_API_KEY from {key} with no key configured")
    auth = "true" if want.get("auth", True) else "false"
    check(env.get("WAYMARK_AUTH", {}).get("value") == auth, f"WAYMARK_AUTH is not {auth}")
    check(auth == "false" or want["auth_secret"], f"scenario {scenario}: auth without an admin key (the chart refuses it)")
    check_admin_key(want, spec["template"], c, args, env, secrets, cli)

    # Migration hook.
    if want["migration"]:
        check("--no-migrate" in args, "the replicas migrate though the Job does")
        job = by_kind["Job"][0]
        ann = job["metadata"].get("annotations", {})
        hooks = set(ann.get("helm.sh/hook", "").split(","))
        check({"pre-install", "pre-upgrade"} <= hooks, f"the Job's hooks are {hooks}")
        jc = job["spec"]["template"]["spec"]["containers"][0]
        check(jc["image"] == c["image"], "the Job runs another image")
        cli.check_migrate_args(jc.get("args", []), "Job")
        ja = jc.get("args", [])
        check(ja[ja.index("--database-url") + 1] == "$(WAYMARK_DATABASE_URL)" if "--database-url" in ja else False,
              f"the Job's args {ja} do not pass $(WAYMARK_DATABASE_URL)")
        jref = env_map(jc).get("WAYMARK_DATABASE_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
        check(jref == db.get("valueFrom", {}).get("secretKeyRef"), "the Job reads another database Secret than the replicas")
        check(job["spec"]["template"]["spec"].get("securityContext", {}).get("runAsNonRoot") is True, "the Job may run as root")
        # A Secret the chart makes for the Job must exist before it: a hook of lower weight.
        if jref.get("name") in secrets:
            sann = secrets[jref["name"]]["metadata"].get("annotations", {})
            check({"pre-install", "pre-upgrade"} <= set(sann.get("helm.sh/hook", "").split(",")),
                  "the Job's database Secret is not a hook: it would not exist when the Job runs")
            check(int(sann.get("helm.sh/hook-weight", 0)) < int(ann.get("helm.sh/hook-weight", 0)),
                  "the database Secret's hook weight is not below the Job's")
    else:
        check("--no-migrate" not in args, "--no-migrate without a migration Job")

    if want["monitor"]:
        sm = by_kind["ServiceMonitor"][0]
        check(sm["apiVersion"] == "monitoring.coreos.com/v1", f"ServiceMonitor apiVersion {sm['apiVersion']}")
        check(all(svc["metadata"]["labels"].get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()),
              "the ServiceMonitor does not select the Service")
        ep = sm["spec"]["endpoints"][0]
        check(ep.get("port") == "metrics" and ep.get("path") == "/metrics", f"the ServiceMonitor scrapes {ep}")
        cred = ep.get("authorization", {}).get("credentials", {})
        check((cred.get("name"), cred.get("key")) == want["auth_secret"],
              f"Prometheus sends the key from {cred}, not {want['auth_secret']}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("compose")
    c.add_argument("file")
    c.add_argument("--bin", required=True)
    h = sub.add_parser("chart")
    h.add_argument("scenario", choices=sorted(SCENARIOS))
    h.add_argument("rendered")
    h.add_argument("--bin", required=True)
    h.add_argument("--cargo", required=True)
    a = ap.parse_args()
    cli = Cli(a.bin)
    if a.what == "compose":
        check_compose(a.file, cli)
        finish(f"compose {a.file}")
    else:
        check_chart(a.scenario, a.rendered, cli, a.cargo)
        finish(f"chart ({a.scenario})")


if __name__ == "__main__":
    main()
