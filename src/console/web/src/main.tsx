// The console page's entry: applies the theme and renders the app into #app.
import { render } from "preact";
import { App } from "./app";
import { applyTheme } from "./theme";
// uPlot's stylesheet here rather than beside the charts: a lazy page importing CSS would
// get a stylesheet of its own that nothing loads (esbuild does not inject it).
import "uplot/dist/uPlot.min.css";
import "./styles.css";

applyTheme();
const root = document.getElementById("app");
if (root) {
  root.textContent = "";
  render(<App />, root);
}
