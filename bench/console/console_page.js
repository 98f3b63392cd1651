// The browser half of `sluice bench console` (bench/console_bench.cc runs it, compiled in):
// Debian's chromium, headless, driven by puppeteer-core, against a running `sluice serve`.
//
// 1. Page loads: each page is opened once in each of `cold_runs` fresh browser contexts
//    (an empty cache: what a new user's first visit costs; the median is the cold figure),
//    then `runs - 1` more times in the last one's tab, with the bundle cached (every later
//    visit). A load lasts from the navigation's start to the first frame in which the page
//    shows its data: a heading, no "loading…" left; the next starts once the tab is quiet
//    (no request for 250 ms). Every main-thread task over 50 ms (the Long Tasks API) is
//    recorded, with the longest.
// 2. Following: the topic page of `follow.topic` follows it live ("Follow live") for
//    `follow.seconds` while the bench produces to it; the long tasks meanwhile, and how
//    many rows the page drew.
//
// The bench runs it twice: for the pages (nothing else running), then to follow (while it
// produces).
// Input: one JSON argument {base, chromium, pages: [path], runs, cold_runs} or {base,
// chromium, follow: {topic, seconds}}.
// Output: one JSON object on stdout {pages: [{path, cold_ms, cold_runs_ms: [..], warm_ms:
// [..], longest_task_ms, long_tasks}]} or {follow: {seconds, longest_task_ms, long_tasks, rows_shown}}.
'use strict'

const puppeteer = require('puppeteer-core')

const kLongTasks = `
  window.__longTasks = [];
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) window.__longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) {}
`

// The time (ms since the navigation started) of the first frame showing the page's data.
async function shownAt (page) {
  const handle = await page.waitForFunction(() => {
    const main = document.querySelector('main') || document.body
    const text = main.innerText || ''
    if (!main.querySelector('h1') || text.includes('loading…')) return false
    return performance.now()
  }, { polling: 'raf', timeout: 60000 })
  return handle.jsonValue()
}

// Loads `path` in `page` (a tab): the time to the data shown, and the long tasks meanwhile.
async function load (page, base, path) {
  await page.goto(base + path, { waitUntil: 'domcontentloaded', timeout: 60000 })
  const ms = await shownAt(page)
  const tasks = await page.evaluate(() => window.__longTasks.slice())
  // The page's work after its data shows (the SQL page's editor and schema) ends before the
  // next load starts: each load is measured from a quiet tab, as a user's next click is.
  await page.waitForNetworkIdle({ idleTime: 250, timeout: 10000 }).catch(() => {})
  return { ms, tasks }
}

async function main () {
  const input = JSON.parse(process.argv[2])
  const browser = await puppeteer.launch({
    executablePath: input.chromium,
    headless: true,
    // Root in a container has no user namespaces for chromium's sandbox.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu']
  })
  const out = {}
  try {
    if (input.pages) out.pages = []
    const median = xs => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
    for (const path of input.pages || []) {
      // Cold: each load in a fresh context (an empty cache); the last context's tab then
      // loads the page again and again (warm).
      const cold = []
      const tasks = []
      let context, page
      for (let c = 0; c < (input.cold_runs || 1); c++) {
        if (context) await context.close()
        context = await browser.createBrowserContext()
        page = await context.newPage()
        await page.setViewport({ width: 1280, height: 860 })
        await page.evaluateOnNewDocument(kLongTasks)
        const r = await load(page, input.base, path)
        cold.push(r.ms)
        tasks.push(...r.tasks)
      }
      const warm = []
      for (let i = 1; i < input.runs; i++) {
        const r = await load(page, input.base, path)
        warm.push(r.ms)
        tasks.push(...r.tasks)
      }
      await context.close()
      out.pages.push({
        path,
        cold_ms: median(cold),
        cold_runs_ms: cold,
        warm_ms: warm,
        longest_task_ms: tasks.length ? Math.max(...tasks) : 0,
        long_tasks: tasks.length
      })
    }

    const f = input.follow
    if (!f) return
    const context = await browser.createBrowserContext()
    const page = await context.newPage()
    await page.setViewport({ width: 1280, height: 860 })
    await page.evaluateOnNewDocument(kLongTasks)
    await page.goto(`${input.base}/topics/${encodeURIComponent(f.topic)}`, { waitUntil: 'domcontentloaded' })
    await shownAt(page)
    const button = await page.waitForSelector('xpath/.//button[normalize-space()="Follow live"]')
    await page.evaluate(() => { window.__longTasks.length = 0 })
    await button.click()
    await new Promise(resolve => setTimeout(resolve, f.seconds * 1000))
    const tasks = await page.evaluate(() => window.__longTasks.slice())
    const rows = await page.evaluate(() => document.querySelectorAll('main table tbody tr').length)
    out.follow = {
      seconds: f.seconds,
      longest_task_ms: tasks.length ? Math.max(...tasks) : 0,
      long_tasks: tasks.length,
      rows_shown: rows
    }
    await context.close()
  } finally {
    await browser.close()
    process.stdout.write(JSON.stringify(out) + '\n')
  }
}

main().catch(e => {
  process.stderr.write(`console bench page: ${e.stack || e}\n`)
  process.exit(1)
})
