// The login form the page shows when the HTTP port asks for a login (http.auth: basic or
// token; docs/design/0026 #11): a user and a password, exchanged for a token by api.logIn.
import { useEffect, useRef, useState } from "preact/hooks";
import { logIn, type LoginState } from "../api";
import { asApiError } from "../hooks";

const kWhy: Record<NonNullable<LoginState["asking"]>, string> = {
  login: "This sluice asks for a login.",
  expired: "Your login expired or was ended; log in again to go on.",
  renew: "Your login runs out within a minute; log in again to go on without a break.",
};

const kTitle = "Log in · sluice";

export function LoginForm(props: { asking: NonNullable<LoginState["asking"]>; lastUser: string }) {
  const [user, setUser] = useState(props.lastUser);
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const userField = useRef<HTMLInputElement>(null);
  const passwordField = useRef<HTMLInputElement>(null);
  const alive = useRef(true);

  // The first empty field has the focus, so that typing starts there (the password when the
  // user is filled in from the last login).
  useEffect(() => {
    (props.lastUser === "" ? userField : passwordField).current?.focus();
    // The page's title back when the form goes, unless a page set its own meanwhile.
    const title = document.title;
    document.title = kTitle;
    return () => {
      alive.current = false;
      if (document.title === kTitle) document.title = title;
    };
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError("");
    try {
      await logIn(user, password);  // on success the app takes this form away
    } catch (err) {
      if (!alive.current) return;
      setError(asApiError(err).message);
      setBusy(false);
      passwordField.current?.select();
    }
  };

  return (
    <section class="login" aria-labelledby="login-title">
      <form class="panel" onSubmit={submit}>
        <h1 id="login-title">Log in to sluice</h1>
        <p class="muted">{kWhy[props.asking]}</p>
        <label>
          User
          <input
            ref={userField}
            name="username"
            autoComplete="username"
            autoCapitalize="off"
            spellcheck={false}
            required
            value={user}
            onInput={(e) => setUser(e.currentTarget.value)}
          />
        </label>
        <label>
          Password
          <input
            ref={passwordField}
            type="password"
            name="password"
            autoComplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <div class="buttons">
          <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
            Log in
          </button>
        </div>
        {error !== "" && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </section>
  );
}
