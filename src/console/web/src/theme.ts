// Light or dark: the system's choice (prefers-color-scheme) unless the user picked one with
// the toggle, kept in localStorage. The stylesheet reads <html data-theme>.
import { useEffect, useState } from "preact/hooks";

export type ThemeChoice = "system" | "light" | "dark";
const kKey = "sluice.theme";
const kChange = "sluice:theme";
const dark = window.matchMedia("(prefers-color-scheme: dark)");

export function themeChoice(): ThemeChoice {
  try {
    const v = localStorage.getItem(kKey);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";  // storage refused (a privacy setting)
  }
}

export function setThemeChoice(choice: ThemeChoice): void {
  try {
    if (choice === "system") localStorage.removeItem(kKey);
    else localStorage.setItem(kKey, choice);
  } catch {
    // Not kept across visits, but applied now.
  }
  applyTheme(choice);
}

export function applyTheme(choice: ThemeChoice = themeChoice()): void {
  if (choice === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  window.dispatchEvent(new Event(kChange));
}

export function effectiveTheme(): "light" | "dark" {
  const c = themeChoice();
  return c === "system" ? (dark.matches ? "dark" : "light") : c;
}

// The theme in effect; re-renders when the toggle or the system changes it (charts draw
// on a canvas and must be drawn again in the other colours).
export function useTheme(): "light" | "dark" {
  const [theme, setTheme] = useState(effectiveTheme());
  useEffect(() => {
    const update = () => setTheme(effectiveTheme());
    window.addEventListener(kChange, update);
    dark.addEventListener("change", update);
    return () => {
      window.removeEventListener(kChange, update);
      dark.removeEventListener("change", update);
    };
  }, []);
  return theme;
}
