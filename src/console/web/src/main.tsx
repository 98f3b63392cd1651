// The console page's entry: applies the theme and renders the app into #app.
import { render } from "preact";
import { App } from "./app";
import { applyTheme } from "./theme";
import "./styles.css";

applyTheme();
const root = document.getElementById("app");
if (root) {
  root.textContent = "";
  render(<App />, root);
}
