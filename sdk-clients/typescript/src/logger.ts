// Logging: a tiny interface any logger fits (console, pino, winston), and a default that writes
// to stderr at the level in WAYMARK_LOG (debug, info, warn, error, silent; default info).

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
type Level = (typeof LEVELS)[number];

/** A logger that prints `waymark <level> <message> {fields}` lines to stderr from `level` up. */
export function consoleLogger(level: Level = (process.env.WAYMARK_LOG as Level) || "info"): Logger {
  const min = Math.max(LEVELS.indexOf(level), 0);
  const at =
    (l: Level) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (LEVELS.indexOf(l) < min) return;
      const extra = fields && Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : "";
      process.stderr.write(`waymark ${l} ${message}${extra}\n`);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A logger that drops everything. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
