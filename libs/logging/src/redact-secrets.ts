/** API keys anywhere in text: the public prefix stays readable, the secret part does not. */
const API_KEY = /\b(rbx_[0-9a-z]{10})_[0-9A-Za-z_-]{43}/g;
/** Shorter values are too likely to match ordinary text to be worth hiding. */
const MIN_SECRET_LENGTH = 6;

/**
 * Replaces every known secret value (the admin token, the model key, database passwords)
 * and anything shaped like an API key with `[redacted]`. Field-path redaction in the logger
 * catches secrets logged under a known name; this catches them wherever else they end up,
 * such as inside an error message a provider sent back.
 */
export function redactSecrets(text: string, secrets: readonly string[] = []): string {
  let out = text.replace(API_KEY, '$1_[redacted]');
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    out = out.split(secret).join('[redacted]');
    // The same value as it appears inside a JSON string (quotes and backslashes escaped).
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) out = out.split(escaped).join('[redacted]');
  }
  return out;
}
