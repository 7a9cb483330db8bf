// The console's shell: the session (WhoAmI, sign-in), the header, routes and keyboard shortcuts.

import "./styles.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { onUnauthenticated, setNamespace } from "./api.js";
import { Dialog, Link, Loading, ErrorBox } from "./components.js";
import { parseRoute, paths, navigate, useLocation, type Route } from "./router.js";
import { capsOf, needSignIn, refreshSession, roleName, signOut, useSession } from "./session.js";
import { applyTheme, nextTheme, storedTheme, type Theme } from "./theme.js";
import { SignIn, WorkerKey } from "./pages/signin.js";
import { WorkflowList } from "./pages/workflows.js";
import { WorkflowPage } from "./pages/workflow.js";
import { ComparePage } from "./pages/compare.js";
import { QueuePage, QueuesPage } from "./pages/queues.js";
import { WorkersPage } from "./pages/workers.js";
import { SchedulePage, SchedulesPage } from "./pages/schedules.js";
import { AdminPage } from "./pages/admin.js";

function nsOf(route: Route): string | undefined {
  return "ns" in route ? route.ns : undefined;
}

function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(storedTheme);
  const label = theme === "system" ? "Theme: system" : theme === "light" ? "Theme: light" : "Theme: dark";
  return (
    <button
      type="button"
      class="icon-button"
      title={`${label} (click to change)`}
      aria-label={label}
      data-testid="theme-toggle"
      onClick={() => {
        const t = nextTheme(theme);
        applyTheme(t);
        setTheme(t);
      }}
    >
      <svg viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">
        {theme === "dark" ? (
          <path d="M13 9.5A5.5 5.5 0 0 1 6.5 3a5.5 5.5 0 1 0 6.5 6.5Z" fill="currentColor" />
        ) : theme === "light" ? (
          <g fill="none" stroke="currentColor" stroke-width="1.5" stroke-linecap="round">
            <circle cx="8" cy="8" r="3" fill="currentColor" />
            <path d="M8 1v1.5M8 13.5V15M1 8h1.5M13.5 8H15M3 3l1 1M12 12l1 1M3 13l1-1M12 4l1-1" />
          </g>
        ) : (
          <g>
            <circle cx="8" cy="8" r="6" fill="none" stroke="currentColor" stroke-width="1.5" />
            <path d="M8 2a6 6 0 0 1 0 12Z" fill="currentColor" />
          </g>
        )}
      </svg>
      <span class="theme-label">{theme}</span>
    </button>
  );
}

function WhoAmIMenu() {
  const { whoami } = useSession();
  if (!whoami) return null;
  const caps = capsOf(whoami);
  const role = whoami.authEnabled ? roleName(whoami.key?.role) : "no auth";
  return (
    <details class="menu" data-testid="whoami">
      <summary title="Who you are">
        <span class={`role role-${role.replace(" ", "-")}`}>{role}</span>
        {whoami.key?.name && <span class="menu-name">{whoami.key.name}</span>}
      </summary>
      <div class="menu-panel">
        {whoami.authEnabled ? (
          <dl class="fields compact">
            <div class="field">
              <dt>Role</dt>
              <dd>{role}</dd>
            </div>
            <div class="field">
              <dt>Key</dt>
              <dd>
                {whoami.key?.name || <span class="muted">(no name)</span>} <code>{whoami.key?.keyId}</code>
              </dd>
            </div>
            <div class="field">
              <dt>Namespaces</dt>
              <dd>{whoami.key?.namespaces.join(", ")}</dd>
            </div>
          </dl>
        ) : (
          <p>The server runs without --auth: every namespace and action is open.</p>
        )}
        {caps.readOnly && <p class="note">This console is read-only (--console-read-only).</p>}
        <p class="muted small">Server {whoami.serverVersion}</p>
        {whoami.authEnabled && (
          <button type="button" class="btn" data-testid="signout" onClick={() => signOut()}>
            Sign out
          </button>
        )}
      </div>
    </details>
  );
}

function Header({ route }: { route: Route }) {
  const { whoami } = useSession();
  const caps = capsOf(whoami);
  const ns = nsOf(route) ?? lastNamespace(whoami?.namespaces ?? []);
  const section = route.name;
  const nav: [string, string, boolean][] = ns
    ? [
        ["Workflows", paths.workflows(ns), section === "workflows" || section === "workflow" || section === "compare"],
        ["Queues", paths.queues(ns), section === "queues" || section === "queue"],
        ["Workers", paths.workers(ns), section === "workers"],
        ["Schedules", paths.schedules(ns), section === "schedules" || section === "schedule"],
      ]
    : [];
  const namespaces = whoami?.namespaces ?? [];
  return (
    <header class="topbar">
      <Link href="/" class="brand" aria-label="Waymark console home">
        <svg viewBox="0 0 20 20" width="20" height="20" aria-hidden="true">
          <path d="M10 1.5 17.5 6v8L10 18.5 2.5 14V6Z" fill="none" stroke="currentColor" stroke-width="1.6" />
          <path d="M6 7.5 8 13l2-4 2 4 2-5.5" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linejoin="round" stroke-linecap="round" />
        </svg>
        <span>Waymark</span>
      </Link>
      {namespaces.length > 0 && (
        <label class="ns-switch" title="Namespace">
          <span class="sr-only">Namespace</span>
          <select
            data-testid="namespace-switch"
            value={ns}
            onChange={(e) => {
              const next = (e.target as HTMLSelectElement).value;
              rememberNamespace(next);
              navigate(paths.workflows(next));
            }}
          >
            {ns && !namespaces.includes(ns) && <option value={ns}>{ns}</option>}
            {namespaces.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
      )}
      <nav class="nav" aria-label="Sections">
        {nav.map(([label, href, active]) => (
          <Link key={label} href={href} class={active ? "active" : ""} aria-current={active ? "page" : undefined}>
            {label}
          </Link>
        ))}
        {caps.admin && whoami && (
          <Link href="/admin" class={section === "admin" ? "active" : ""} aria-current={section === "admin" ? "page" : undefined}>
            Admin
          </Link>
        )}
      </nav>
      <div class="spacer" />
      <button type="button" class="icon-button" title="Keyboard shortcuts (?)" aria-label="Keyboard shortcuts" onClick={() => window.dispatchEvent(new Event("waymark:shortcuts"))}>
        ?
      </button>
      <ThemeToggle />
      <WhoAmIMenu />
    </header>
  );
}

const NS_KEY = "waymark.console.namespace";

function rememberNamespace(ns: string): void {
  try {
    sessionStorage.setItem(NS_KEY, ns);
  } catch {
    // not kept
  }
}

function lastNamespace(namespaces: readonly string[]): string {
  let last = "";
  try {
    last = sessionStorage.getItem(NS_KEY) ?? "";
  } catch {
    // not kept
  }
  if (last && namespaces.includes(last)) return last;
  return namespaces[0] ?? "";
}

const SHORTCUTS: [string, string][] = [
  ["/", "Focus the first filter"],
  ["j / k", "Move the selection in the workflow list"],
  ["Enter", "Open the selected workflow"],
  ["g w", "Go to workflows"],
  ["g q", "Go to queues"],
  ["g s", "Go to schedules"],
  ["?", "Show these shortcuts"],
  ["Esc", "Close a dialog"],
];

function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  const tag = target.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
}

function useShortcuts(ns: string | undefined): boolean {
  const [help, setHelp] = useState(false);
  useEffect(() => {
    let g = 0;
    const onKey = (e: KeyboardEvent) => {
      if (e.metaKey || e.ctrlKey || e.altKey || isTyping(e.target) || document.querySelector("dialog[open]")) return;
      if (e.key === "?") {
        e.preventDefault();
        setHelp(true);
        return;
      }
      if (e.key === "/") {
        const first = document.querySelector<HTMLElement>("[data-filter]");
        if (first) {
          e.preventDefault();
          first.focus();
        }
        return;
      }
      if (e.key === "g") {
        g = Date.now();
        return;
      }
      if (g && Date.now() - g < 1500 && ns) {
        const to = e.key === "w" ? paths.workflows(ns) : e.key === "q" ? paths.queues(ns) : e.key === "s" ? paths.schedules(ns) : "";
        g = 0;
        if (to) {
          e.preventDefault();
          navigate(to);
        }
      }
    };
    const onHelp = () => setHelp(true);
    window.addEventListener("keydown", onKey);
    window.addEventListener("waymark:shortcuts", onHelp);
    return () => {
      window.removeEventListener("keydown", onKey);
      window.removeEventListener("waymark:shortcuts", onHelp);
    };
  }, [ns]);
  useEffect(() => {
    if (!help) return;
    const close = () => setHelp(false);
    window.addEventListener("waymark:close-shortcuts", close);
    return () => window.removeEventListener("waymark:close-shortcuts", close);
  }, [help]);
  return help;
}

function Page({ route }: { route: Route }) {
  switch (route.name) {
    case "workflows":
      return <WorkflowList ns={route.ns} />;
    case "workflow":
      return <WorkflowPage key={`${route.ns}/${route.id}`} ns={route.ns} id={route.id} />;
    case "compare":
      return <ComparePage ns={route.ns} />;
    case "queues":
      return <QueuesPage ns={route.ns} />;
    case "queue":
      return <QueuePage key={route.queue} ns={route.ns} name={route.queue} />;
    case "workers":
      return <WorkersPage ns={route.ns} />;
    case "schedules":
      return <SchedulesPage ns={route.ns} />;
    case "schedule":
      return <SchedulePage key={route.schedule} ns={route.ns} name={route.schedule} />;
    case "admin":
      return <AdminPage />;
    default:
      return (
        <div class="page">
          <h1>Not found</h1>
          <p>
            No page here. <Link href="/">Go to the workflows</Link>.
          </p>
        </div>
      );
  }
}

function App() {
  const loc = useLocation();
  const session = useSession();
  const route = parseRoute(loc.pathname);
  const ns = nsOf(route);
  setNamespace(ns ?? lastNamespace(session.whoami?.namespaces ?? []));
  if (ns) rememberNamespace(ns);
  const help = useShortcuts(ns ?? (lastNamespace(session.whoami?.namespaces ?? []) || undefined));

  useEffect(() => {
    void refreshSession();
    return onUnauthenticated(() => needSignIn("The server asked for an API key."));
  }, []);

  // Where to go once known: "/" to the first namespace's workflows; the sign-in page back to
  // where it came from.
  useEffect(() => {
    if (session.phase === "signin" && route.name !== "signin") {
      const next = loc.pathname + loc.search;
      navigate(`/signin?next=${encodeURIComponent(next)}`, { replace: true });
    } else if (session.phase === "ready" && route.name === "signin") {
      const next = new URLSearchParams(loc.search).get("next");
      navigate(next && next.startsWith("/") && !next.startsWith("/signin") ? next : "/", { replace: true });
    } else if (session.phase === "ready" && route.name === "root") {
      const first = lastNamespace(session.whoami?.namespaces ?? []);
      if (first) navigate(paths.workflows(first), { replace: true });
    }
  }, [session.phase, route.name, loc.pathname, loc.search]);

  let body;
  if (session.phase === "loading") body = <Loading what="Connecting to the server" />;
  else if (session.phase === "signin") body = route.name === "signin" ? <SignIn /> : <Loading what="Signing in" />;
  else if (session.phase === "worker") body = <WorkerKey />;
  else if (session.phase === "failed")
    body = (
      <div class="page narrow">
        <h1>The server did not answer</h1>
        <ErrorBox error={session.error} title="WhoAmI failed" />
        <button type="button" class="btn primary" onClick={() => void refreshSession()}>
          Try again
        </button>
      </div>
    );
  else if (route.name === "root" || route.name === "signin") body = <Loading />;
  else if (route.name === "admin" && !capsOf(session.whoami).admin)
    body = (
      <div class="page narrow">
        <h1>Admin</h1>
        <p>The admin page needs an admin key.</p>
      </div>
    );
  else body = <Page route={route} />;

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      {session.phase === "ready" && <Header route={route} />}
      <main id="main">{body}</main>
      {help && (
        <Dialog title="Keyboard shortcuts" onClose={() => window.dispatchEvent(new Event("waymark:close-shortcuts"))}>
          <table class="shortcuts">
            <tbody>
              {SHORTCUTS.map(([k, what]) => (
                <tr key={k}>
                  <td>
                    {k.split(" ").map((part, i) => (part === "/" && k !== "/" ? <span key={i}> / </span> : <kbd key={i}>{part}</kbd>))}
                  </td>
                  <td>{what}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Dialog>
      )}
    </>
  );
}

applyTheme(storedTheme());
render(<App />, document.getElementById("app")!);
