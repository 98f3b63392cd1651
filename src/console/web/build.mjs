// Builds the console page (docs/design/0026-console.md #5) into OUTDIR: OUTDIR/index.html
// naming OUTDIR/assets/app-HASH.js and OUTDIR/assets/app-HASH.css, one bundle each,
// minified for the browsers the page supports. src/console/assets/CMakeLists.txt runs it
// and compiles the result into the binary; nothing here runs when sluice runs.
//
//   node src/console/web/build.mjs OUTDIR
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");

const outdir = process.argv[2];
if (!outdir || process.argv.length > 3) {
  console.error("usage: node src/console/web/build.mjs OUTDIR");
  process.exit(2);
}

// esbuild, preact and uPlot are pinned npm packages of the repository (package.json), not
// system tools: refuse to build with missing or other versions than the pins.
const howToInstall =
  "run `make configure` (scripts/setup.sh), or `npm ci --ignore-scripts` in " + root;
const pins = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")).dependencies;
for (const name of ["esbuild", "preact", "uplot"]) {
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
  // The names carry the content's hash, so that they can be cached forever.
  entryNames: "assets/[name]-[hash]",
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
const url = (file) => "/" + path.relative(out, path.resolve(here, file)).split(path.sep).join("/");

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
</head>
<body>
<div id="app"><noscript>The sluice console needs JavaScript.</noscript></div>
</body>
</html>
`;
await writeFile(path.join(out, "index.html"), html);
