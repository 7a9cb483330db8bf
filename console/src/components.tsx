// Building blocks shared by the pages.

import type { AnchorHTMLAttributes, ComponentChildren, JSX } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { describeError, type ApiErrorInfo } from "./api.js";
import { WorkflowStatus } from "./gen/waymark/v1/types_pb.js";
import { humanDuration, isoTime, localTime, relative, STATUS_HELP, statusName, tsMs } from "./format.js";
import { isPlainClick, navigate } from "./router.js";

export function Link({ href, children, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; "data-testid"?: string }) {
  return (
    <a
      href={href}
      {...rest}
      onClick={(e) => {
        if (rest.onClick) (rest.onClick as (e: MouseEvent) => void)(e);
        if (!isPlainClick(e)) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

/** The small shape beside a status's text: each status has its own, so colour is never alone. */
function StatusShape({ status }: { status: WorkflowStatus }) {
  let shape: JSX.Element;
  switch (status) {
    case WorkflowStatus.SUCCESS:
      shape = <path d="M2 5.5 4.2 7.7 8.2 2.8" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round" />;
      break;
    case WorkflowStatus.ERROR:
      shape = <path d="M2.5 2.5 7.5 7.5M7.5 2.5 2.5 7.5" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" />;
      break;
    case WorkflowStatus.PENDING:
      shape = <path d="M3 2 8 5 3 8Z" fill="currentColor" />;
      break;
    case WorkflowStatus.ENQUEUED:
      shape = <circle cx="5" cy="5" r="3.2" fill="none" stroke="currentColor" stroke-width="1.6" />;
      break;
    case WorkflowStatus.DELAYED:
      shape = (
        <g fill="none" stroke="currentColor" stroke-width="1.4" stroke-linecap="round">
          <circle cx="5" cy="5" r="3.6" />
          <path d="M5 3v2.2l1.5 1" />
        </g>
      );
      break;
    case WorkflowStatus.CANCELLED:
      shape = (
        <g fill="none" stroke="currentColor" stroke-width="1.5">
          <circle cx="5" cy="5" r="3.6" />
          <path d="M2.6 7.4 7.4 2.6" />
        </g>
      );
      break;
    case WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED:
      shape = <path d="M5 1.2 9 8.6H1Z" fill="currentColor" />;
      break;
    case WorkflowStatus.CONTINUED_AS_NEW:
      shape = <path d="M1.5 5h6M5.2 2.5 7.8 5 5.2 7.5" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round" />;
      break;
    default:
      shape = <rect x="2.5" y="2.5" width="5" height="5" fill="currentColor" />;
  }
  return (
    <svg class="shape" viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
      {shape}
    </svg>
  );
}

const STATUS_LABEL: Record<number, string> = {
  [WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED]: "DEAD-LETTERED",
  [WorkflowStatus.CONTINUED_AS_NEW]: "CONTINUED",
};

export function StatusBadge({ status, testid }: { status: WorkflowStatus; testid?: string }) {
  const name = statusName(status);
  return (
    <span class={`badge st-${name.toLowerCase()}`} title={STATUS_HELP[status] ?? name} data-testid={testid} data-status={name}>
      <StatusShape status={status} />
      <span class="badge-text">{testid ? name : STATUS_LABEL[status] ?? name}</span>
    </span>
  );
}

/** A plain badge: a label with a tone. */
export function Tag({ tone = "neutral", children, title }: { tone?: string; children: ComponentChildren; title?: string }) {
  return (
    <span class={`tag tone-${tone}`} title={title}>
      {children}
    </span>
  );
}

/** A time: local, with its age; the ISO time in the title. */
export function Time({ ts, ms, age = true }: { ts?: Timestamp | undefined; ms?: number | undefined; age?: boolean }) {
  const t = ms ?? tsMs(ts);
  if (t === undefined) return <span class="muted">—</span>;
  const iso = isoTime(t);
  return (
    <time dateTime={iso} title={iso} class="time">
      {localTime(t)}
      {age && <span class="age"> · {relative(t)}</span>}
    </time>
  );
}

/** Only the age ("3 min ago"), the ISO time in the title. */
export function Age({ ts, ms }: { ts?: Timestamp | undefined; ms?: number | undefined }) {
  const t = ms ?? tsMs(ts);
  if (t === undefined) return <span class="muted">—</span>;
  const iso = isoTime(t);
  return (
    <time dateTime={iso} title={`${iso} (${localTime(t)})`} class="time">
      {relative(t)}
    </time>
  );
}

export function Dur({ ms }: { ms: number | undefined }) {
  if (ms === undefined) return <span class="muted">—</span>;
  return <span class="num">{humanDuration(ms)}</span>;
}

const FOLD_AT = 2048;

/** JSON (or any text), folded past ~2 kB behind "show all". */
export function Code({ text, testid, class: cls }: { text: string; testid?: string; class?: string }) {
  const [open, setOpen] = useState(false);
  const long = text.length > FOLD_AT;
  const shown = long && !open ? `${text.slice(0, FOLD_AT)}…` : text;
  return (
    <div class={`code-wrap ${cls ?? ""}`}>
      <pre class="code" data-testid={testid}>
        {shown}
      </pre>
      {long && (
        <button type="button" class="link-button" onClick={() => setOpen(!open)}>
          {open ? "fold" : `show all (${(text.length / 1024).toFixed(1)} kB)`}
        </button>
      )}
    </div>
  );
}

/** A refused call: its code, the ErrorInfo reason and the server's message. */
export function ErrorBox({ error, title }: { error: ApiErrorInfo | unknown; title?: string }) {
  if (!error) return null;
  const info = isInfo(error) ? error : describeError(error);
  return (
    <div class="error-box" role="alert" data-testid="error">
      <div class="error-head">
        <svg viewBox="0 0 10 10" width="12" height="12" aria-hidden="true">
          <path d="M5 1.2 9 8.6H1Z" fill="currentColor" />
        </svg>
        <strong>{title ?? "The server refused"}</strong>
        <code class="reason">{info.reason || info.codeName}</code>
        {info.reason && info.reason !== info.codeName && <span class="muted">({info.codeName})</span>}
      </div>
      <div class="error-message">{info.message}</div>
      {Object.keys(info.metadata).length > 0 && (
        <div class="error-meta">
          {Object.entries(info.metadata).map(([k, v]) => (
            <span key={k}>
              {k}: <code>{v}</code>{" "}
            </span>
          ))}
        </div>
      )}
    </div>
  );
}

function isInfo(e: unknown): e is ApiErrorInfo {
  return typeof e === "object" && e !== null && "codeName" in e && "reason" in e;
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <div class="loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      {what}…
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** A titled block of a page. */
export function Section({
  title,
  children,
  actions,
  testid,
  id,
}: {
  title: ComponentChildren;
  children: ComponentChildren;
  actions?: ComponentChildren;
  testid?: string;
  id?: string;
}) {
  return (
    <section class="card" data-testid={testid} id={id}>
      <header class="card-head">
        <h2>{title}</h2>
        {actions && <div class="card-actions">{actions}</div>}
      </header>
      <div class="card-body">{children}</div>
    </section>
  );
}

/** Label and value pairs. */
export function Fields({ children }: { children: ComponentChildren }) {
  return <dl class="fields">{children}</dl>;
}

export function Field({ label, children, title }: { label: string; children: ComponentChildren; title?: string }) {
  return (
    <div class="field">
      <dt title={title}>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

/**
 * A modal dialog (the native <dialog>: focus stays inside, Escape closes). `onConfirm` runs
 * the action; its refusal is shown in the dialog, which stays open.
 */
export function Dialog({
  title,
  children,
  onClose,
  onConfirm,
  confirmLabel = "Confirm",
  danger = false,
  confirmDisabled = false,
  wide = false,
  confirmTestid = "confirm",
}: {
  title: string;
  children: ComponentChildren;
  onClose: () => void;
  onConfirm?: () => Promise<unknown> | unknown;
  confirmLabel?: string;
  danger?: boolean;
  confirmDisabled?: boolean;
  wide?: boolean;
  confirmTestid?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiErrorInfo | undefined>();
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => {
      if (d?.open) d.close();
    };
  }, []);
  const confirm = async () => {
    if (!onConfirm) return;
    setBusy(true);
    setError(undefined);
    try {
      await onConfirm();
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <dialog
      ref={ref}
      class={`dialog ${wide ? "wide" : ""}`}
      aria-labelledby="dialog-title"
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onClose();
      }}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          void confirm();
        }}
      >
        <h2 id="dialog-title">{title}</h2>
        <div class="dialog-body">{children}</div>
        {error && <ErrorBox error={error} />}
        <div class="dialog-actions">
          <button type="button" class="btn" onClick={onClose} disabled={busy}>
            {onConfirm ? "Cancel" : "Close"}
          </button>
          {onConfirm && (
            <button type="submit" class={`btn ${danger ? "danger" : "primary"}`} data-testid={confirmTestid} disabled={busy || confirmDisabled}>
              {busy ? "Working…" : confirmLabel}
            </button>
          )}
        </div>
      </form>
    </dialog>
  );
}

/** Bars, one per value (oldest first), in SVG; each bar's value in its title. */
export function BarChart({
  values,
  label,
  height = 64,
  barLabel,
}: {
  values: readonly number[];
  label: string;
  height?: number;
  barLabel: (i: number, v: number) => string;
}) {
  const max = Math.max(1, ...values);
  const n = Math.max(values.length, 1);
  return (
    <figure class="chart">
      <svg class="bars" width="100%" height={height} role="img" aria-label={label} preserveAspectRatio="none">
        <line x1="0" x2="100%" y1={height - 0.5} y2={height - 0.5} class="axis" />
        {values.map((v, i) => {
          const h = v === 0 ? 1 : Math.max(2, (v / max) * (height - 14));
          return (
            <rect key={i} class={v === 0 ? "bar zero" : "bar"} x={`${(i / n) * 100 + 0.6}%`} width={`${100 / n - 1.2}%`} y={height - h - 1} height={h}>
              <title>{barLabel(i, v)}</title>
            </rect>
          );
        })}
        <text x="0" y="10" class="chart-max">
          {max.toLocaleString()}
        </text>
      </svg>
      <figcaption>{label}</figcaption>
    </figure>
  );
}

/** A tiny bar chart for a table cell. */
export function Sparkline({ values, title }: { values: readonly number[]; title: string }) {
  const max = Math.max(1, ...values);
  const n = Math.max(values.length, 1);
  const h = 18;
  return (
    <svg class="spark" width="90" height={h} role="img" aria-label={title}>
      <title>{title}</title>
      {values.map((v, i) => {
        const bh = v === 0 ? 1 : Math.max(2, (v / max) * h);
        return <rect key={i} x={(i * 90) / n} width={Math.max(1, 90 / n - 1)} y={h - bh} height={bh} class={v === 0 ? "bar zero" : "bar"} />;
      })}
    </svg>
  );
}

/** A page's title row. */
export function PageHead({ title, sub, children }: { title: ComponentChildren; sub?: ComponentChildren; children?: ComponentChildren }) {
  return (
    <div class="page-head">
      <div class="page-title">
        <h1>{title}</h1>
        {sub && <div class="page-sub">{sub}</div>}
      </div>
      {children && <div class="page-actions">{children}</div>}
    </div>
  );
}

/** Copies text, falling back to selecting it where the clipboard API is not offered (plain http). */
export async function copyText(text: string, fallback?: HTMLElement | null): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (fallback) {
      const range = document.createRange();
      range.selectNodeContents(fallback);
      const sel = getSelection();
      sel?.removeAllRanges();
      sel?.addRange(range);
      try {
        return document.execCommand("copy");
      } catch {
        return false;
      }
    }
    return false;
  }
}
