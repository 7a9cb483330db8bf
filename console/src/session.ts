// Who is using the console: the WhoAmI answer for this tab's key, and what it allows.

import { useEffect, useState } from "preact/hooks";
import { clients, Code, currentNamespace, describeError, isCode, setApiKey, setWhoAmINamespace, type ApiErrorInfo } from "./api.js";
import { Role, type WhoAmIResponse } from "./gen/waymark/v1/admin_pb.js";

export type Phase =
  /** WhoAmI not answered yet. */
  | "loading"
  /** The server wants a key (none, or one that stopped working). */
  | "signin"
  /** Signed in (or no --auth). */
  | "ready"
  /** A worker key: it may not read, so the console can do nothing with it. */
  | "worker"
  /** The server could not be asked. */
  | "failed";

export interface Session {
  phase: Phase;
  whoami?: WhoAmIResponse;
  error?: ApiErrorInfo;
  /** Why the sign-in page is shown (a key that stopped working). */
  signinReason?: string;
}

let session: Session = { phase: "loading" };
const listeners = new Set<(s: Session) => void>();

function set(s: Session): void {
  session = s;
  listeners.forEach((f) => f(s));
}

export function getSession(): Session {
  return session;
}

export function useSession(): Session {
  const [s, setS] = useState(session);
  useEffect(() => {
    listeners.add(setS);
    setS(session);
    return () => {
      listeners.delete(setS);
    };
  }, []);
  return s;
}

/** Asks WhoAmI with the current key; the answer decides the phase. */
export async function refreshSession(): Promise<Session> {
  try {
    const whoami = await whoAmI();
    if (whoami.authEnabled && whoami.key?.role === Role.WORKER) set({ phase: "worker", whoami });
    else set({ phase: "ready", whoami });
  } catch (e) {
    if (isCode(e, Code.Unauthenticated)) set({ phase: "signin", error: describeError(e) });
    else if (isCode(e, Code.PermissionDenied)) set({ phase: "worker", error: describeError(e) });
    else set({ phase: "failed", error: describeError(e) });
  }
  return session;
}

/**
 * WhoAmI first names no namespace (the server then takes the key's only one, else "default");
 * a key that may not act there is asked again in the namespace of the URL.
 */
async function whoAmI() {
  setWhoAmINamespace("");
  try {
    return await clients.admin.whoAmI({});
  } catch (e) {
    const ns = currentNamespace();
    if (!ns || !isCode(e, Code.PermissionDenied)) throw e;
    setWhoAmINamespace(ns);
    try {
      return await clients.admin.whoAmI({});
    } finally {
      setWhoAmINamespace("");
    }
  }
}

/** A call was answered UNAUTHENTICATED: the key is gone or never was. */
export function needSignIn(reason: string): void {
  if (session.phase === "signin") return;
  set({ phase: "signin", signinReason: reason });
}

export function signOut(): void {
  setApiKey("");
  set({ phase: "signin", signinReason: "Signed out." });
}

export const roleName = (r: Role | undefined): string => (r === undefined ? "" : (Role[r] ?? "").toLowerCase());

export interface Caps {
  /** Whether keys are checked at all. */
  auth: boolean;
  /** Workflow, queue and schedule writes (CLIENT, ADMIN; everything without --auth). */
  write: boolean;
  /** The admin page (ADMIN; everything without --auth). */
  admin: boolean;
  /** The console was started read-only. */
  readOnly: boolean;
}

export function capsOf(w: WhoAmIResponse | undefined): Caps {
  const auth = w?.authEnabled ?? false;
  const role = w?.key?.role;
  const readOnly = w?.consoleReadOnly ?? false;
  const mayWrite = !auth || role === Role.CLIENT || role === Role.ADMIN;
  return { auth, readOnly, write: mayWrite && !readOnly, admin: !auth || role === Role.ADMIN };
}

export function useCaps(): Caps {
  return capsOf(useSession().whoami);
}
