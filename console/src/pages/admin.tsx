// Keys and namespaces, for admin keys.

import { useRef, useState } from "preact/hooks";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { clients } from "../api.js";
import { copyText, Dialog, Empty, ErrorBox, Link, Loading, PageHead, Section, Tag, Time } from "../components.js";
import { Role, type ApiKey, type CreateApiKeyResponse, type Namespace } from "../gen/waymark/v1/admin_pb.js";
import { fromLocalInput, toLocalInput } from "../format.js";
import { useQuery, useTitle } from "../hooks.js";
import { paths } from "../router.js";
import { roleName, useCaps, refreshSession } from "../session.js";

export function AdminPage() {
  useTitle("Admin");
  const caps = useCaps();
  const write = !caps.readOnly;
  return (
    <div class="page">
      <PageHead title="Admin" sub="Namespaces and API keys this key administers" />
      <Namespaces write={write} />
      <Keys write={write} />
    </div>
  );
}

function Namespaces({ write }: { write: boolean }) {
  const q = useQuery((signal) => clients.admin.listNamespaces({}, { signal }), []);
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<Namespace | undefined>();
  return (
    <Section
      title="Namespaces"
      testid="namespaces"
      actions={
        write && (
          <button type="button" class="btn small" onClick={() => setCreating(true)} data-testid="namespace-create">
            New namespace
          </button>
        )
      }
    >
      {q.error && <ErrorBox error={q.error} />}
      {!q.data ? (
        !q.error && <Loading what="Loading namespaces" />
      ) : q.data.namespaces.length === 0 ? (
        <Empty>No namespace.</Empty>
      ) : (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th>Namespace</th>
                <th>Created</th>
                <th class="num" title="StartWorkflow calls a second, per replica">
                  Start rate
                </th>
                <th class="num">Worker streams</th>
                <th class="num">Waits</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {q.data.namespaces.map((n) => (
                <tr key={n.name} data-testid="namespace-row" data-namespace={n.name}>
                  <td>
                    <Link href={paths.workflows(n.name)}>{n.name}</Link>
                  </td>
                  <td>
                    <Time ts={n.createdAt} />
                  </td>
                  <td class="num">{n.limits?.startRate || "—"}</td>
                  <td class="num">{n.limits?.maxWorkerStreams || "—"}</td>
                  <td class="num">{n.limits?.maxWaits || "—"}</td>
                  <td class="actions-cell">
                    {write && n.name !== "default" && (
                      <button type="button" class="btn small danger" onClick={() => setDeleting(n)}>
                        Delete
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {creating && <CreateNamespace onClose={() => setCreating(false)} onDone={() => (q.reload(), void refreshSession())} />}
      {deleting && <DeleteNamespace ns={deleting} onClose={() => setDeleting(undefined)} onDone={() => (q.reload(), void refreshSession())} />}
    </Section>
  );
}

function CreateNamespace({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const [name, setName] = useState("");
  return (
    <Dialog
      title="New namespace"
      confirmLabel="Create"
      confirmDisabled={!name.trim()}
      onClose={onClose}
      onConfirm={async () => {
        await clients.admin.createNamespace({ name: name.trim() });
        onDone();
        onClose();
      }}
    >
      <label class="stack">
        <span>Name (1-40 characters of a-z, 0-9 and -)</span>
        <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} pattern="[a-z0-9][a-z0-9\-]{0,39}" data-testid="namespace-name" spellcheck={false} />
      </label>
    </Dialog>
  );
}

function DeleteNamespace({ ns, onClose, onDone }: { ns: Namespace; onClose: () => void; onDone: () => void }) {
  const [force, setForce] = useState(false);
  const [typed, setTyped] = useState("");
  return (
    <Dialog
      title={`Delete namespace ${ns.name}`}
      danger
      confirmLabel="Delete the namespace"
      confirmDisabled={typed !== ns.name}
      onClose={onClose}
      onConfirm={async () => {
        await clients.admin.deleteNamespace({ name: ns.name, force });
        onDone();
        onClose();
      }}
    >
      <p>
        Deletes <strong>{ns.name}</strong> and everything in it — workflows, steps, messages, queues, schedules — on every replica. Keys that act only in it are revoked.
      </p>
      <label class="check">
        <input type="checkbox" checked={force} onChange={(e) => setForce((e.target as HTMLInputElement).checked)} />
        Even while it holds unfinished workflows (they are dropped)
      </label>
      <label class="stack">
        <span>Type the namespace's name to confirm</span>
        <input value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} spellcheck={false} data-testid="namespace-confirm-name" />
      </label>
    </Dialog>
  );
}

const ROLES: [Role, string][] = [
  [Role.READER, "reader — reads everything"],
  [Role.CLIENT, "client — reads; starts, cancels, sends; queues and schedules"],
  [Role.WORKER, "worker — connects workers only"],
  [Role.ADMIN, "admin — everything in its namespaces, keys included"],
];

function roleTone(r: Role): string {
  return r === Role.ADMIN ? "warn" : r === Role.WORKER ? "info" : r === Role.CLIENT ? "ok" : "neutral";
}

function Keys({ write }: { write: boolean }) {
  const q = useQuery((signal) => clients.admin.listApiKeys({}, { signal }), []);
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<ApiKey | undefined>();
  const [created, setCreated] = useState<CreateApiKeyResponse | undefined>();
  const now = Date.now();
  return (
    <Section
      title="API keys"
      testid="keys"
      actions={
        write && (
          <button type="button" class="btn small" onClick={() => setCreating(true)} data-testid="key-create">
            New key
          </button>
        )
      }
    >
      {q.error && <ErrorBox error={q.error} />}
      {!q.data ? (
        !q.error && <Loading what="Loading keys" />
      ) : q.data.keys.length === 0 ? (
        <Empty>No key.</Empty>
      ) : (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th>Key id</th>
                <th>Name</th>
                <th>Role</th>
                <th>Namespaces</th>
                <th>Name patterns</th>
                <th>Created</th>
                <th>Expires</th>
                <th>State</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {q.data.keys.map((k) => {
                const expired = k.expiresAt && Number(k.expiresAt.seconds) * 1000 < now;
                return (
                  <tr key={k.keyId} data-testid="key-row" data-key-id={k.keyId} class={k.revokedAt || expired ? "dim" : ""}>
                    <td class="mono">{k.keyId}</td>
                    <td>{k.name || <span class="muted">—</span>}</td>
                    <td>
                      <Tag tone={roleTone(k.role)}>{roleName(k.role)}</Tag>
                    </td>
                    <td>{k.namespaces.join(", ")}</td>
                    <td class="mono small">{k.namePatterns.join(", ") || <span class="muted">any</span>}</td>
                    <td>
                      <Time ts={k.createdAt} />
                    </td>
                    <td>{k.expiresAt ? <Time ts={k.expiresAt} /> : <span class="muted">never</span>}</td>
                    <td>{k.revokedAt ? <Tag tone="bad">revoked</Tag> : expired ? <Tag tone="bad">expired</Tag> : <Tag tone="ok">active</Tag>}</td>
                    <td class="actions-cell">
                      {write && !k.revokedAt && (
                        <button type="button" class="btn small danger" onClick={() => setRevoking(k)}>
                          Revoke
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {creating && (
        <CreateKey
          onClose={() => setCreating(false)}
          onCreated={(r) => {
            setCreating(false);
            setCreated(r);
            q.reload();
          }}
        />
      )}
      {created && <NewSecret created={created} onClose={() => setCreated(undefined)} />}
      {revoking && (
        <Dialog
          title="Revoke the key"
          danger
          confirmLabel="Revoke"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await clients.admin.revokeApiKey({ keyId: revoking.keyId });
            setRevoking(undefined);
            q.reload();
          }}
        >
          <p>
            Revoke <code>{revoking.keyId}</code>
            {revoking.name ? ` (${revoking.name})` : ""}? Calls made with it are refused from now on, on every replica within seconds, and its worker streams and long polls end.
          </p>
        </Dialog>
      )}
    </Section>
  );
}

function CreateKey({ onClose, onCreated }: { onClose: () => void; onCreated: (r: CreateApiKeyResponse) => void }) {
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>(Role.READER);
  const [namespaces, setNamespaces] = useState("");
  const [patterns, setPatterns] = useState("");
  const [expires, setExpires] = useState("");
  const list = (s: string) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean);
  return (
    <Dialog
      title="New API key"
      confirmLabel="Create key"
      wide
      onClose={onClose}
      onConfirm={async () => {
        const r = await clients.admin.createApiKey({
          name: name.trim(),
          role,
          namespaces: list(namespaces),
          namePatterns: list(patterns),
          expiresAt: expires ? timestampFromMs(Date.parse(expires)) : undefined,
        });
        onCreated(r);
      }}
    >
      <label class="stack">
        <span>Name (a label for people)</span>
        <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} data-testid="key-name" spellcheck={false} />
      </label>
      <label class="stack">
        <span>Role</span>
        <select value={String(role)} onChange={(e) => setRole(Number((e.target as HTMLSelectElement).value) as Role)} data-testid="key-role">
          {ROLES.map(([r, label]) => (
            <option key={r} value={String(r)}>
              {label}
            </option>
          ))}
        </select>
      </label>
      <label class="stack">
        <span>Namespaces (comma-separated; * for every one; required for an admin key)</span>
        <input value={namespaces} onInput={(e) => setNamespaces((e.target as HTMLInputElement).value)} placeholder="default" data-testid="key-namespaces" spellcheck={false} />
      </label>
      {role === Role.WORKER && (
        <label class="stack">
          <span>Workflow and step names it may register (comma-separated; a prefix ends with *; empty: any)</span>
          <input value={patterns} onInput={(e) => setPatterns((e.target as HTMLInputElement).value)} placeholder="billing.*" data-testid="key-patterns" spellcheck={false} />
        </label>
      )}
      <label class="stack">
        <span>Expires (optional)</span>
        <input type="datetime-local" step={1} value={toLocalInput(expires)} onInput={(e) => setExpires(fromLocalInput((e.target as HTMLInputElement).value))} data-testid="key-expires" />
      </label>
    </Dialog>
  );
}

function NewSecret({ created, onClose }: { created: CreateApiKeyResponse; onClose: () => void }) {
  const ref = useRef<HTMLElement>(null);
  const [copied, setCopied] = useState<boolean | undefined>();
  return (
    <Dialog title="Your new key" onClose={onClose} wide>
      <div class="callout warn">
        <strong>Copy it now.</strong> This is the only time the key is shown: the server keeps only its hash.
      </div>
      <p>
        Key <code>{created.key?.keyId}</code>, role {roleName(created.key?.role)}, namespaces {created.key?.namespaces.join(", ")}.
      </p>
      <div class="secret-row">
        <code class="secret" ref={ref} data-testid="new-key-secret">
          {created.secret}
        </code>
        <button type="button" class="btn primary" onClick={async () => setCopied(await copyText(created.secret, ref.current))}>
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      {copied === false && <p class="note">The browser did not let the page copy: the key is selected, copy it with your keyboard.</p>}
    </Dialog>
  );
}
