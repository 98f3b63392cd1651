// Builds the console page (docs/design/0026-console.md #5) into OUTDIR: OUTDIR/index.html
// naming OUTDIR/assets/app-HASH.js and OUTDIR/assets/app-HASH.css, minified for the
// browsers the page supports, plus the chunks the script imports when a page needs them
// (OUTDIR/assets/editor-HASH.js: CodeMirror, for the pipeline and SQL editors only). Every
// file of OUTDIR is embedded (src/console/assets/embed.cmake globs it), and the page as a
// whole must stay within kBudgetGzipBytes. src/console/assets/CMakeLists.txt runs it and
// compiles the result into the binary; nothing here runs when sluice runs.
//
//   node src/console/web/build.mjs OUTDIR
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");

const outdir = process.argv[2];
if (!outdir || process.argv.length > 3) {
  console.error("usage: node src/console/web/build.mjs OUTDIR");
  process.exit(2);
}

// Every file of the page gzipped (as embed.cmake serves them), at most: the page loads
// over slow links too.
const kBudgetGzipBytes = 400 * 1024;

// esbuild, preact, uPlot and CodeMirror are pinned npm packages of the repository
// (package.json), not system tools: refuse to build with missing or other versions than
// the pins.
const howToInstall =
  "run `make configure` (scripts/setup.sh), or `npm ci --ignore-scripts` in " + root;
const pins = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")).dependencies;
const kPackages = [
  "esbuild",
  "preact",
  "uplot",
  "@codemirror/state",
  "@codemirror/view",
  "@codemirror/commands",
  "@codemirror/language",
  "@codemirror/lang-yaml",
  "@codemirror/lang-sql",
  "@codemirror/autocomplete",
  "@codemirror/lint",
  "@lezer/highlight",
];
for (const name of kPackages) {
  let installed = "none";
  try {
    const meta = path.join(root, "node_modules", name, "package.json");
    installed = JSON.parse(await readFile(meta, "utf8")).version;
  } catch {
    // Not installed.
  }
  if (installed !== pins[name]) {
    const has = installed === "none" ? "is not installed" : `is ${installed}`;
    console.error(
      `console page: ${name} in ${path.join(root, "node_modules")} ${has}, package.json ` +
        `pins ${pins[name]}; ${howToInstall}, then build again`,
    );
    process.exit(1);
  }
}
const esbuild = await import("esbuild");

const out = path.resolve(outdir);
// Start empty: a bundle of an earlier build must not be embedded beside the new one.
await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["chrome110", "firefox110"],
  jsx: "automatic",
  jsxImportSource: "preact",
  // A dynamic import() is a chunk of its own, fetched when first needed (the editor).
  splitting: true,
  // The names carry the content's hash, so that they can be cached forever.
  entryNames: "assets/[name]-[hash]",
  chunkNames: "assets/[name]-[hash]",
  assetNames: "assets/[name]-[hash]",
  outdir: out,
  define: { "process.env.NODE_ENV": '"production"' },
  charset: "utf8",
  legalComments: "eof",
  metafile: true,
  logLevel: "warning",
});

// The entry's script and the stylesheet esbuild gathered from its CSS imports.
const outputs = Object.entries(result.metafile.outputs);
const entry = outputs.find(([, o]) => o.entryPoint === "src/main.tsx");
if (!entry || !entry[1].cssBundle) {
  console.error("console page: esbuild produced no script or no stylesheet for src/main.tsx");
  process.exit(1);
}
// esbuild gives a lazy chunk that imports CSS a stylesheet of its own, and nothing would
// load it: every stylesheet is imported from src/main.tsx.
const strayCss = outputs.filter(([file]) => file.endsWith(".css") && file !== entry[1].cssBundle);
if (strayCss.length > 0) {
  console.error(
    "console page: stylesheets no page loads (import CSS from src/main.tsx only): " +
      strayCss.map(([file]) => file).join(", "),
  );
  process.exit(1);
}
const url = (file) => "/" + path.relative(out, path.resolve(here, file)).split(path.sep).join("/");
// Chunks the entry imports statically (code it shares with a lazy chunk): fetched with it
// rather than after it.
const preloads = entry[1].imports
  .filter((i) => i.kind === "import-statement" && !i.external)
  .map((i) => `<link rel="modulepreload" href="${url(i.path)}">\n`)
  .join("");

// No inline script or style: the page's Content-Security-Policy allows neither.
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>sluice</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${url(entry[1].cssBundle)}">
<script type="module" src="${url(entry[0])}"></script>
${preloads}</head>
<body>
<div id="app"><noscript>The sluice console needs JavaScript.</noscript></div>
</body>
</html>
`;
await writeFile(path.join(out, "index.html"), html);

// What the page costs: every file gzipped. Over the budget is an error, not a warning.
let total = 0;
const sizes = [];
for (const [file] of outputs) {
  if (file.endsWith(".map")) continue;
  const gz = gzipSync(await readFile(path.resolve(here, file)), { level: 9 }).length;
  total += gz;
  sizes.push(`${url(file)} ${gz} B`);
}
total += gzipSync(html, { level: 9 }).length;
if (total > kBudgetGzipBytes) {
  console.error(
    `console page: ${total} bytes gzipped, over the budget of ${kBudgetGzipBytes}:\n  ` +
      sizes.join("\n  "),
  );
  process.exit(1);
}
