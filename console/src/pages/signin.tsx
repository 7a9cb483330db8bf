// Sign-in with an API key, kept in sessionStorage only (it dies with the tab).

import { useState } from "preact/hooks";
import { setApiKey } from "../api.js";
import { ErrorBox } from "../components.js";
import { useTitle } from "../hooks.js";
import { refreshSession, signOut, useSession } from "../session.js";

export function SignIn() {
  useTitle("Sign in");
  const session = useSession();
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) return;
    setBusy(true);
    setApiKey(k);
    const s = await refreshSession();
    setBusy(false);
    if (s.phase === "signin") {
      setApiKey("");
      setRefused(true);
    }
  };
  return (
    <div class="signin">
      <form class="card signin-card" onSubmit={submit}>
        <div class="signin-brand">
          <svg viewBox="0 0 20 20" width="28" height="28" aria-hidden="true">
            <path d="M10 1.5 17.5 6v8L10 18.5 2.5 14V6Z" fill="none" stroke="currentColor" stroke-width="1.6" />
            <path d="M6 7.5 8 13l2-4 2 4 2-5.5" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linejoin="round" stroke-linecap="round" />
          </svg>
          <h1>Waymark console</h1>
        </div>
        <p>
          This server checks API keys. Sign in with a <strong>reader</strong>, <strong>client</strong> or <strong>admin</strong> key (
          <code>wmk_…</code>); <code>waymark key create --role reader</code> makes one.
        </p>
        <label class="stack">
          <span>API key</span>
          <input
            type="password"
            autoComplete="off"
            spellcheck={false}
            autoFocus
            data-testid="signin-key"
            value={key}
            onInput={(e) => {
              setKey((e.target as HTMLInputElement).value);
              setRefused(false);
            }}
            placeholder="wmk_…"
          />
        </label>
        <p class="muted small">The key is kept in this tab only (sessionStorage) and is sent with each call as <code>authorization: Bearer …</code>.</p>
        {refused && session.error && <ErrorBox error={session.error} title="This key was refused" />}
        {!refused && session.signinReason && <p class="note">{session.signinReason}</p>}
        <button type="submit" class="btn primary wide" data-testid="signin-submit" disabled={busy || !key.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </div>
  );
}

/** A worker key may only run workers: it cannot read what the console shows. */
export function WorkerKey() {
  useTitle("Another key needed");
  const session = useSession();
  const key = session.whoami?.key;
  return (
    <div class="signin">
      <div class="card signin-card" data-testid="worker-key">
        <h1>This key cannot use the console</h1>
        <p>
          The console needs a <strong>reader</strong>, <strong>client</strong> or <strong>admin</strong> key.{" "}
          {key ? (
            <>
              This one (<code>{key.keyId}</code>
              {key.name ? `, ${key.name}` : ""}) is a worker key: it may only connect workers.
            </>
          ) : (
            <>The server refused this one what the console asks first (WhoAmI): a worker key may only connect workers.</>
          )}
        </p>
        {session.error && <ErrorBox error={session.error} />}
        <button type="button" class="btn primary" onClick={() => signOut()}>
          Sign in with another key
        </button>
      </div>
    </div>
  );
}
