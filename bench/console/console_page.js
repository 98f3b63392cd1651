// The browser half of `sluice bench console` (bench/console_bench.cc runs it, compiled in):
// Debian's chromium, headless, driven by puppeteer-core, against a running `sluice serve`.
//
// 1. Page loads: each page is opened `runs` times in one tab of a fresh browser context, the
//    first with an empty cache (what a new user's first visit costs), the others with the
//    bundle cached (every later visit). A load lasts from the navigation's start to the
//    first frame in which the page shows its data: a heading, no "loading…" left. Every main-thread
//    task over 50 ms (the Long Tasks API) is recorded, with the longest.
// 2. Following: the topic page of `follow.topic` follows it live ("Follow live") for
//    `follow.seconds` while the bench produces to it; the long tasks meanwhile, and how
//    many rows the page drew.
//
// The bench runs it twice: for the pages (nothing else running), then to follow (while it
// produces).
// Input: one JSON argument {base, chromium, pages: [path], runs} or {base, chromium,
// follow: {topic, seconds}}.
// Output: one JSON object on stdout {pages: [{path, cold_ms, warm_ms: [..], longest_task_ms,
// long_tasks}]} or {follow: {seconds, longest_task_ms, long_tasks, rows_shown}}.
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
    for (const path of input.pages || []) {
      // A fresh context (an empty cache) and one tab, loading the page again and again.
      const context = await browser.createBrowserContext()
      const page = await context.newPage()
      await page.setViewport({ width: 1280, height: 860 })
      await page.evaluateOnNewDocument(kLongTasks)
      const runs = []
      for (let i = 0; i < input.runs; i++) runs.push(await load(page, input.base, path))
      await context.close()
      const tasks = runs.flatMap(r => r.tasks)
      out.pages.push({
        path,
        cold_ms: runs[0].ms,
        warm_ms: runs.slice(1).map(r => r.ms),
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
