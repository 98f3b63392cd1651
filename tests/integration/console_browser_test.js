// The console page in a real browser (Debian's chromium, headless, driven by
// puppeteer-core) against a real `sluice serve` this script starts on loopback
// (docs/design/0026-console.md): every page renders with no script error, a topic is
// created from the form, the message browser shows records produced through the API (JSON
// laid out, binary as hex), following live shows records produced while it follows, a
// group's page shows its offsets, a pipeline is written in the editor (its problems under
// their lines, its rows previewed over the topic's messages), saved and runs; the SQL
// page streams 100,000 rows into its grid (the last one reached by scrolling), shows an
// error's message, charts a result and shows EXPLAIN's plan as text; the Start page walks
// from the overview to rows of a lake table (a topic made, samples sent, the pipeline's SQL
// changed with its preview following, the pipeline started into an Iceberg table that
// grows, the table queried) in at most 15 user actions; the tables page lists the
// warehouse's tables; a pipeline's activity, stopped and kept from its page; a table's
// compaction previewed and run; light and dark; a port with logins (the page's login form,
// each user shown what they may see); every page at 1,000 topics and 100 pipeline files of
// which 10 run. Screenshots of every page go to SCREENSHOT_DIR (the README's images are
// copied from a run).
//
// usage: node console_browser_test.js path/to/sluice SCREENSHOT_DIR
'use strict'

const assert = require('node:assert')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const puppeteer = require('puppeteer-core')

const [sluice, shots] = process.argv.slice(2)
if (!shots) {
  console.error('usage: node console_browser_test.js path/to/sluice SCREENSHOT_DIR')
  process.exit(2)
}
const CHROMIUM = process.env.SLUICE_CHROMIUM || '/usr/bin/chromium'
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function until (what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

// `sluice serve` on free loopback ports; resolves with its console URL once it listens.
function startSluice (dir, extraConfig = '', { reuse = false } = {}) {
  fs.mkdirSync(dir, { recursive: true })
  const config = path.join(dir, 'sluice.yaml')
  fs.writeFileSync(config, 'groups:\n  initial_rebalance_delay: 0\n' + extraConfig)
  if (!reuse) {
    fs.mkdirSync(path.join(dir, 'pipelines'))
    fs.mkdirSync(path.join(dir, 'lake'))
  }
  // The query server is on (the SQL page runs its queries there) and the warehouse an
  // empty folder (the tables page lists its tables).
  const proc = spawn(sluice, ['serve', '--config', config, '--data-dir', path.join(dir, 'data'),
    '--pipelines', path.join(dir, 'pipelines'), '--warehouse', path.join(dir, 'lake'),
    '--kafka-addr', '127.0.0.1:0', '--http-addr', '127.0.0.1:0', '--pg-addr', '127.0.0.1:0',
    '--schema-registry-addr', 'off', '--shards', '2'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  proc.stdout.on('data', d => { out += d })
  proc.stderr.on('data', d => { err += d })
  const ready = until('sluice serve listening', () => {
    if (proc.exitCode !== null) throw new Error(`sluice serve exited ${proc.exitCode}:\n${err}`)
    const m = out.match(/^sluice: console on (http:\/\/127\.0\.0\.1:\d+)\//m)
    return m && m[1]
  })
  const kafka = () => out.match(/^sluice: serving Kafka on (127\.0\.0\.1:\d+) /m)[1]
  return { proc, ready, kafka, logs: () => `${out}\n${err.split('\n').slice(-40).join('\n')}` }
}

async function api (base, method, p, body) {
  const r = await fetch(base + p, {
    method,
    headers: body ? { 'Content-Type': 'application/json', 'X-Sluice-Request': '1' } : {},
    body: body ? JSON.stringify(body) : undefined
  })
  const text = await r.text()
  return { status: r.status, body: text ? JSON.parse(text) : null }
}

// Logins everywhere (SASL on Kafka, ACLs, tokens on the HTTP port) and two users: the page
// asks for a login, refuses a wrong password, and shows each user what their principal may
// see (alice no topic without an ACL, the super user admin every one).
const kSecured = `sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256]
  users: ["admin:admin-secret", "alice:alice-secret"]
authorization:
  enabled: true
  super_users: ["User:admin"]
http:
  auth: token
`

async function logins (browser, dir) {
  const s = startSluice(dir, kSecured)
  try {
    const base = await s.ready
    const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: 'admin', client_secret: 'admin-secret' })
    const t = await fetch(base + '/v1/oauth/tokens', { method: 'POST', body: form })
    assert.strictEqual(t.status, 200)
    const token = (await t.json()).access_token
    const made = await fetch(base + '/api/v1/topics', {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'X-Sluice-Request': '1' },
      body: JSON.stringify({ name: 'payroll', partitions: 1 })
    })
    assert.strictEqual(made.status, 201, await made.text())

    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 860 })
    const text = () => page.evaluate(() => document.body.innerText)
    const button = label => page.waitForSelector(`xpath/.//button[normalize-space()="${label}" and not(@disabled)]`, { timeout: 30000 })
    const logIn = async (user, password) => {
      const name = await page.waitForSelector('input[name="username"]')
      await name.click({ clickCount: 3 })
      await page.keyboard.press('Backspace')
      await name.type(user)
      const secret = await page.$('input[name="password"]')
      await secret.click({ clickCount: 3 })
      await page.keyboard.press('Backspace')
      await secret.type(password)
      await (await button('Log in')).click()
    }
    await page.goto(base + '/topics', { waitUntil: 'domcontentloaded' })
    await button('Log in')
    assert.ok((await text()).includes('This sluice asks for a login.'), await text())
    await page.screenshot({ path: path.join(shots, 'login.png'), fullPage: true })
    await logIn('alice', 'not-her-password')
    await until('the wrong password refused', async () => (await text()).includes('wrong user or password'))
    await logIn('alice', 'alice-secret')
    await until("alice's topics (none she may see)", async () => /Topics/.test(await text()) && /No topics yet/.test(await text()))
    assert.ok((await text()).includes('alice'), 'the logged-in user shown')
    assert.ok(!(await text()).includes('payroll'), 'alice sees no topic without an ACL')
    const stored = await page.evaluate(() => localStorage.length + sessionStorage.length + document.cookie.length)
    assert.strictEqual(stored, 0, 'the token is kept in memory only')
    await (await button('Log out')).click()
    await logIn('admin', 'admin-secret')
    await until("admin's topics", async () => (await text()).includes('payroll'))
    await page.close()
    console.log('logins: asked, a wrong password refused, each user shown what they may see')
  } finally {
    s.proc.kill('SIGTERM')
    await new Promise(resolve => s.proc.exitCode !== null ? resolve() : s.proc.on('exit', resolve))
  }
}

// Every page at the scale: 1,000 topics and 100 pipeline files of which 10 run (the
// others stopped: *.yaml.stopped). Each page shows its heading and data, no script error;
// timings are `sluice bench console`'s, not asserted here.
async function atScale (browser, dir, problems) {
  // 90 stopped files, there before sluice starts (it reads the folder then; a stopped one
  // is never started, so its broker address does not matter); 10 started from the API.
  const yaml = (name, topic, kafka) => `pipeline:
  name: ${name}
  batch_size: 1000
  flush_interval_seconds: 1
  source:
    type: kafka
    kafka:
      brokers: [${kafka}]
      group_id: ${name}
      auto_offset_reset: earliest
      topics: [${topic}]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT count(*) AS n FROM batch
  sink:
    type: noop
  duckdb: {memory_limit: 64MiB}
`
  const topic = i => `scale-topic-${String(i).padStart(4, '0')}`
  const pipeline = i => `scale-${String(i).padStart(3, '0')}`
  fs.mkdirSync(path.join(dir, 'pipelines'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'lake'), { recursive: true })
  for (let i = 10; i < 100; i++) {
    fs.writeFileSync(path.join(dir, 'pipelines', `${pipeline(i)}.yaml.stopped`), yaml(pipeline(i), topic(i), '127.0.0.1:9'))
  }
  const s = startSluice(dir, '', { reuse: true })
  try {
    const base = await s.ready
    for (let i = 0; i < 1000; i += 50) {
      const made = await Promise.all(Array.from({ length: 50 }, (_, j) =>
        api(base, 'POST', '/api/v1/topics', { name: topic(i + j), partitions: 2 })))
      for (const r of made) assert.strictEqual(r.status, 201, JSON.stringify(r.body))
    }
    for (let i = 0; i < 10; i++) {
      const r = await api(base, 'PUT', `/api/v1/pipelines/${pipeline(i)}`, { yaml: yaml(pipeline(i), topic(i), s.kafka()) })
      assert.strictEqual(r.status, 201, JSON.stringify(r.body))
    }
    const listed = (await api(base, 'GET', '/api/v1/pipelines')).body.pipelines
    assert.strictEqual(listed.length, 100, `pipelines listed: ${listed.length}`)
    assert.strictEqual(listed.filter(p => p.state === 'running').length, 10)
    assert.strictEqual(listed.filter(p => p.state === 'stopped').length, 90)
    const base2 = base

    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 860 })
    page.on('pageerror', e => problems.push(`page error at scale: ${e.message}`))
    for (const p of ['/', '/topics', `/topics/${topic(0)}`, '/groups', '/pipelines', '/pipelines/scale-000',
      '/pipelines/scale-050', '/tables', '/sql', '/start']) {
      await page.goto(base2 + p, { waitUntil: 'domcontentloaded' })
      await until(`${p} with its data at 1,000 topics`, async () => page.evaluate(() => {
        const main = document.querySelector('main') || document.body
        return main.querySelector('h1') !== null && !main.innerText.includes('loading…')
      }), 60000)
      if (p === '/topics') {
        // 50 drawn at first, 200 more per click, or all.
        const shown = async () => (await page.evaluate(() => document.body.innerText))
        await until('50 of 1,000 topics drawn', async () => (await shown()).includes('50 of 1,000 shown'))
        await page.screenshot({ path: path.join(shots, 'topics-1000.png'), fullPage: false })
        await (await page.waitForSelector('xpath/.//button[normalize-space()="Show 200 more"]')).click()
        await until('250 of 1,000 topics drawn', async () => (await shown()).includes('250 of 1,000 shown'))
        await (await page.waitForSelector('xpath/.//button[normalize-space()="Show all 1,000"]')).click()
        await until('all 1,000 topics drawn', async () => (await page.$$('main tbody tr')).length === 1000)
      }
      if (p === '/pipelines') {
        await until('100 pipelines listed', async () => (await page.$$('main tbody tr')).length >= 100)
        await page.screenshot({ path: path.join(shots, 'pipelines-100.png'), fullPage: false })
      }
    }
    await page.close()
    console.log('at scale: every page with 1,000 topics and 100 pipeline files (10 running)')
  } finally {
    s.proc.kill('SIGTERM')
    await new Promise(resolve => s.proc.exitCode !== null ? resolve() : s.proc.on('exit', resolve))
  }
}

async function main () {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-browser-'))
  fs.mkdirSync(shots, { recursive: true })
  const s = startSluice(dir)
  let browser
  const problems = []
  try {
    const base = await s.ready
    assert.strictEqual((await api(base, 'POST', '/api/v1/topics', { name: 'orders', partitions: 3 })).status, 201)
    for (let i = 0; i < 12; i++) {
      const r = await api(base, 'POST', '/api/v1/topics/orders/messages', {
        partition: i % 3,
        key: `customer-${i % 4}`,
        value: JSON.stringify({ order: i, customer: `customer-${i % 4}`, amount: 10.5 * i, items: [{ sku: 'A1', qty: i }] }),
        headers: { source: 'browser-test' }
      })
      assert.strictEqual(r.status, 201, JSON.stringify(r.body))
    }
    // A group with committed offsets (an admin's reset makes one with no members).
    assert.strictEqual((await api(base, 'POST', '/api/v1/groups/billing/reset-offsets',
      { topic: 'orders', to: 'offset', offset: 2 })).status, 200)

    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Root in a container has no user namespaces for chromium's sandbox.
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu']
    })
    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 860 })
    page.on('pageerror', e => problems.push(`page error: ${e.message}`))
    // (A refusal the page shows, such as the bad topic name below, is logged by the
    // browser as a failed load with its 4xx status: not a problem of the page.)
    page.on('console', m => {
      if (m.type() === 'error' && !/Failed to load resource: .* status of 4\d\d/.test(m.text())) {
        problems.push(`console error: ${m.text()}`)
      }
    })
    page.on('requestfailed', r => {
      // A live stream closed by leaving the page is expected. So is ERR_ABORTED for a query's
      // stream read to its end: chromium reports a fetch whose body a reader consumed as
      // aborted now and then (seen on a SELECT 1 the page showed whole); the page's own
      // status line is what the steps below check.
      const aborted = r.failure()?.errorText === 'net::ERR_ABORTED'
      if (!r.url().includes('/messages/live') && !(aborted && new URL(r.url()).pathname === '/api/v1/sql')) {
        problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`)
      }
    })
    const text = () => page.evaluate(() => document.body.innerText)
    const shot = name => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true })

    // Overview: the cards, the cluster's broker, a chart.
    await page.goto(base + '/', { waitUntil: 'networkidle0' })
    await until('the overview', async () => /Overview/.test(await text()) && /Memory/.test(await text()))
    await until('the topic count', async () => /Topics\s*1\b/.test(await text()) || /\b1\s*\n?\s*3 partitions/.test(await text()))
    await shot('overview')

    // Topics: the list, then a topic made from the form.
    await page.goto(base + '/topics', { waitUntil: 'networkidle0' })
    await until('orders listed', async () => (await text()).includes('orders'))
    const createButton = await page.waitForSelector('xpath/.//button[normalize-space()="Create topic"]')
    await createButton.click()
    const nameInput = await page.waitForSelector('form[aria-labelledby="create-topic"] input')
    await nameInput.type('from-the-page')
    await page.keyboard.press('Enter')
    await until('the new topic', async () => (await api(base, 'GET', '/api/v1/topics/from-the-page')).status === 200)
    // Made, the page opens the new topic.
    await until("the new topic's page", async () => page.url().endsWith('/topics/from-the-page'))
    await until('the new topic shown', async () => (await text()).includes('from-the-page'))
    // A name Kafka refuses: the error shows on the page, nothing is made.
    await page.goto(base + '/topics', { waitUntil: 'networkidle0' })
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Create topic"]')).click()
    const again = await page.waitForSelector('form[aria-labelledby="create-topic"] input')
    await again.click({ clickCount: 3 })
    await again.type('no spaces allowed')
    await page.keyboard.press('Enter')
    await until('the refusal shown', async () => /not allowed|only ASCII|TOPIC_EXCEPTION|INVALID/i.test(await text()))
    assert.strictEqual((await api(base, 'GET', '/api/v1/topics/no%20spaces%20allowed')).status, 400)
    await shot('topics')

    // A topic: partitions, configs, messages (JSON laid out).
    await page.goto(base + '/topics/orders', { waitUntil: 'networkidle0' })
    await until('the messages', async () => (await text()).includes('customer-3'))
    const t = await text()
    assert.ok(t.includes('"amount"'), 'a JSON value laid out')
    assert.ok(t.includes('browser-test'), 'a header shown')
    await shot('topic')

    // Following live: records produced while following appear.
    const follow = await page.waitForSelector('xpath/.//button[normalize-space()="Follow live"]')
    await follow.click()
    await sleep(1500) // the stream's consumer starts at the end offsets
    for (let i = 0; i < 5; i++) {
      await api(base, 'POST', '/api/v1/topics/orders/messages', { value: `live-record-${i}` })
    }
    await until('live records', async () => (await text()).includes('live-record-4'))
    await shot('topic-live')
    const stop = await page.waitForSelector('xpath/.//button[normalize-space()="Stop following"]')
    await stop.click()

    // Groups.
    await page.goto(base + '/groups', { waitUntil: 'networkidle0' })
    await until('the group listed', async () => (await text()).includes('billing'))
    await shot('groups')
    await page.goto(base + '/groups/billing', { waitUntil: 'networkidle0' })
    await until('its offsets', async () => (await text()).includes('orders'))
    await until('the lag charted', async () => (await text()).includes('Lag over time') && (await page.$('.uplot')) !== null)
    await shot('group')

    // A pipeline written in the editor: a mistake shown under its line, the rows
    // previewed over the topic's messages, then saved and running.
    const kafkaAddr = s.kafka()
    const pipelineYaml = bad => `pipeline:
  name: by-customer
  batch_size: ${bad ? 'lots' : '100'}
  source:
    type: kafka
    kafka:
      brokers: [${kafkaAddr}]
      group_id: by-customer
      auto_offset_reset: earliest
      topics: [orders]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT customer, count(*) AS orders FROM batch WHERE customer IS NOT NULL GROUP BY customer ORDER BY customer
  sink:
    type: console
`
    await page.goto(base + '/pipelines/new', { waitUntil: 'networkidle0' })
    const editor = '[data-testid="pipeline-editor"] >>> .cm-content'
    await page.waitForSelector(editor)
    // Replaces the text of a CodeMirror editor (found by `selector` each time: the page may
    // have made its editor again meanwhile) as a paste does.
    const setText = async (selector, text) => {
      await (await page.waitForSelector(selector)).click()
      await page.keyboard.down('Control')
      await page.keyboard.press('KeyA')
      await page.keyboard.up('Control')
      await (await page.waitForSelector(selector)).evaluate((el, t) => {
        const data = new DataTransfer()
        data.setData('text/plain', t)
        el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }))
      }, text)
    }
    await setText(editor, pipelineYaml(true))
    await until('the problem under line 3', async () => {
      const problems = await page.$eval('[data-testid="pipeline-problems"]', el => el.innerText).catch(() => '')
      return /line 3/.test(problems) && /batch_size/.test(problems)
    })
    await shot('pipeline-problem')
    await setText(editor, pipelineYaml(false))
    await until('no problems left', async () =>
      (await page.$eval('[data-testid="pipeline-problems"]', el => el.innerText).catch(() => '')).trim() === '')
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Preview"]')).click()
    await until('the preview rows', async () => {
      const rows = await page.$eval('[data-testid="preview-rows"]', el => el.innerText).catch(() => '')
      return rows.includes('customer-0') && rows.includes('customer-3')
    })
    await shot('pipeline-preview')
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Save and start"]')).click()
    await until('the saved pipeline page', async () => page.url().endsWith('/pipelines/by-customer'))
    await until('the pipeline running', async () => {
      const r = await api(base, 'GET', '/api/v1/pipelines/by-customer')
      return r.status === 200 && r.body.state === 'running'
    })
    await page.goto(base + '/pipelines', { waitUntil: 'networkidle0' })
    await until('the pipeline listed', async () => (await text()).includes('by-customer'))
    await shot('pipelines')

    // SQL: 100,000 rows stream into the grid, which renders only the rows in view; the
    // last one is there once the grid is scrolled to its end.
    await page.goto(base + '/sql', { waitUntil: 'networkidle0' })
    const sqlEditor = '[data-testid="sql-editor"] >>> .cm-content'
    await page.waitForSelector(sqlEditor)
    const statusText = () => page.$eval('[data-testid="sql-status"]', el => el.innerText).catch(() => '')
    const runSql = async sql => {
      await setText(sqlEditor, sql)
      await (await page.waitForSelector('xpath/.//button[normalize-space()="Run"]')).click()
      await until(`the answer to ${sql}`, async () => /Finished|Failed|Cancelled/.test(await statusText()))
    }
    await runSql('SELECT range AS n, range * 2 AS doubled FROM range(100000)')
    const status = await statusText()
    assert.ok(/SELECT 100000/.test(status) && /100,000 rows/.test(status), `the tag and count, not: ${status}`)
    const gridText = () => page.$eval('[data-testid="result-grid"]', el => el.innerText)
    await until('the first rows in the grid', async () => /\bdoubled\b/.test(await gridText()) && /\b18\b/.test(await gridText()))
    const rendered = await page.$$eval('[data-testid="result-grid"] [role="row"]', rows => rows.length)
    assert.ok(rendered > 10 && rendered < 200, `only the rows in view rendered, not ${rendered}`)
    await page.$eval('[data-testid="result-grid"]', el => { el.scrollTop = el.scrollHeight })
    await until('the last row in the grid', async () => {
      const t = await gridText()
      return /\b99999\b/.test(t) && /\b199998\b/.test(t)
    })
    // The chart in two clicks: Chart, then Bars. (Once a canvas did not come within 30 s,
    // on a machine running two suites at once: what the page held then is said.)
    const chartDrawn = async after => {
      try {
        await page.waitForSelector('[data-testid="result-chart"] canvas')
      } catch (e) {
        const state = await page.evaluate(() => ({
          pressed: [...document.querySelectorAll('button')].filter(b => b.getAttribute('aria-pressed') === 'true').map(b => b.innerText),
          chart: document.querySelector('[data-testid="result-chart"]')?.outerHTML?.slice(0, 300) ?? null,
          scripts: performance.getEntriesByType('resource').map(r => r.name).filter(n => n.endsWith('.js'))
        }))
        throw new Error(`no chart's canvas after ${after}: ${JSON.stringify(state)} (${e.message})`)
      }
    }
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Chart"]')).click()
    await chartDrawn('Chart')
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Bars"]')).click()
    await chartDrawn('Bars')
    await (await page.waitForSelector('xpath/.//button[normalize-space()="Line"]')).click()
    await shot('sql')
    // The query is kept across a reload.
    await page.reload({ waitUntil: 'networkidle0' })
    const kept = await page.waitForSelector('[data-testid="sql-editor"] >>> .cm-content')
    assert.ok((await kept.evaluate(el => el.textContent)).includes('range(100000)'), 'the query kept')
    // An error shows its message.
    await runSql('SELECT * FROM no_such_table')
    await until('the error shown', async () =>
      (await page.$eval('[data-testid="sql-error"]', el => el.innerText).catch(() => '')).includes('no_such_table'))
    await shot('sql-error')
    // EXPLAIN's plan reads as text.
    await runSql('EXPLAIN SELECT range FROM range(10)')
    await until("EXPLAIN's plan", async () =>
      (await page.$eval('[data-testid="sql-explain"] pre', el => el.innerText).catch(() => '')).trim() !== '')

    // The first page: from the overview's link to rows of a lake table, each step's button
    // pressed once (the SQL changed once, its preview following as it is typed). Every click
    // and key the script gives the page is a user action, counted; waits are not. The
    // pipeline commits to its table every second; the waits are generous all the same.
    let actions = 0
    const act = (fn, count = 1) => { actions += count; return fn() }
    const press = async label => {
      const button = await page.waitForSelector(
        `xpath/.//button[normalize-space()="${label}" and not(@disabled)]`, { timeout: 60000 })
      await act(() => button.click())
    }
    const textOf = testid => page.$eval(`[data-testid="${testid}"]`, el => el.innerText).catch(() => '')
    await page.goto(base + '/', { waitUntil: 'networkidle0' })
    await act(async () => (await page.waitForSelector('main a[href="/start"]')).click())
    await until('the Start page', async () => new URL(page.url()).pathname === '/start')
    await press('Create topic') // the default: a new topic "clicks" of one partition
    await until('the topic made', async () => (await api(base, 'GET', '/api/v1/topics/clicks')).status === 200)
    await press('Send sample messages')
    await until('the 50 samples shown arriving', async () => /\b50 messages in clicks\b/.test(await textOf('start-count')), 60000)
    await until('the preview of the default SQL', async () => {
      const rows = await textOf('preview-rows')
      return /\bviews\b/.test(rows) && rows.includes('/pricing')
    }, 60000)
    // setText is three actions: a click in the editor, Ctrl+A, the paste.
    await act(() => setText('[data-testid="sql-editor"] >>> .cm-content',
      'SELECT page, count(*) AS views, max(ms) AS slowest_ms FROM batch GROUP BY page'), 3)
    await until('the preview following the SQL', async () => (await textOf('preview-rows')).includes('slowest_ms'), 60000)
    await press('Start pipeline') // the default: into the Iceberg table start.clicks_by_page
    await until('the pipeline running', async () => {
      const r = await api(base, 'GET', '/api/v1/pipelines/start-clicks')
      return r.status === 200 && r.body.state === 'running'
    }, 60000)
    const records = async () => Number((await textOf('start-records')).replace(/\D/g, '') || 0)
    await until("the table's first commit shown", async () => (await records()) > 0, 120000)
    const firstRecords = await records()
    await press('Send more messages')
    await until('the table growing', async () => (await records()) > firstRecords, 120000)
    await press('Query it')
    await until("the lake table's rows in the grid", async () => {
      const grid = await textOf('result-grid')
      return grid.includes('slowest_ms') && grid.includes('/pricing')
    }, 60000)
    assert.ok((await textOf('start-query')).includes('"clicks_by_page"'), 'the query reads the lake table')
    assert.ok(actions <= 15, `the walk took ${actions} user actions, more than 15`)
    const yaml = (await api(base, 'GET', '/api/v1/pipelines/start-clicks')).body.yaml
    assert.ok(/type: iceberg/.test(yaml) && /commit_interval_seconds: 1\b/.test(yaml), `the pipeline file: ${yaml}`)
    await shot('start')
    console.log(`start: from the overview to a lake table's rows in ${actions} user actions`)

    // Tables: the Start page's table. Left by the page's own link (a page load would cut the
    // Start page's 2-second polls short, a failed request each).
    await (await page.waitForSelector('xpath/.//nav//a[normalize-space()="Tables"]')).click()
    await until('the tables page', async () =>
      (await page.$('[data-testid="tables-empty"]')) !== null || (await page.$('[data-testid="tables-list"] tbody tr td a')) !== null)
    await until('the Start page\'s table listed', async () => (await textOf('tables-list')).includes('clicks_by_page'))
    await shot('tables')

    // The Start page's pipeline: its activity charted, then stopped from its page (kept, its
    // file renamed) so that the table's files hold still for the maintenance below.
    const button = label => page.waitForSelector(`xpath/.//button[normalize-space()="${label}" and not(@disabled)]`, { timeout: 60000 })
    await page.goto(base + '/pipelines/start-clicks', { waitUntil: 'domcontentloaded' })
    await until('the activity charted', async () =>
      (await text()).includes('Activity') && (await page.$$('.uplot')).length >= 4, 60000)
    await until('a rate in the activity', async () => {
      const h = await api(base, 'GET', '/api/v1/pipelines/start-clicks/history')
      return h.status === 200 && h.body.series.messages_in_per_sec.some(v => v > 0)
    }, 60000)
    await shot('pipeline')
    await (await button('Stop')).click()
    await until('the pipeline stopped', async () => (await api(base, 'GET', '/api/v1/pipelines/start-clicks')).body.state === 'stopped')
    await button('Start')
    const listed = (await api(base, 'GET', '/api/v1/pipelines')).body
    assert.ok(listed.pipelines.find(p => p.name === 'start-clicks').file.endsWith('.stopped'), 'the stopped file renamed')

    // The table's maintenance: a compaction previewed, then run (confirmed); expiry previewed.
    await page.goto(base + '/tables/start/clicks_by_page', { waitUntil: 'domcontentloaded' })
    await (await button('Preview compaction')).click()
    await until('the compaction previewed', async () => /Would rewrite \d+ files/.test(await text()))
    page.once('dialog', d => d.accept())
    await (await button('Run compaction')).click()
    await until('the compaction done', async () => /Compacted: rewrote \d+ files/.test(await text()), 60000)
    await (await button('Preview expiry')).click()
    await until('the expiry previewed', async () => /Would remove|Nothing to expire|No snapshot/i.test(await text()))
    await shot('table')

    // Dark.
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }])
    await page.goto(base + '/', { waitUntil: 'networkidle0' })
    await until('the overview in dark', async () => /Overview/.test(await text()))
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor)
    const [r, g, b] = bg.match(/\d+/g).map(Number)
    assert.ok(r + g + b < 200, `a dark background, not ${bg}`)
    await shot('overview-dark')

    // A path that is no page still loads the page, and an unknown API path is a JSON 404.
    await page.goto(base + '/no/such/page', { waitUntil: 'networkidle0' })
    await until('the page frame', async () => /Overview/.test(await text()))
    const missing = await api(base, 'GET', '/api/v1/no/such/thing')
    assert.strictEqual(missing.status, 404)
    assert.strictEqual(missing.body.error.code, 'NOT_FOUND')

    assert.deepStrictEqual(problems, [], `no script errors or failed requests: ${problems.join('; ')}`)
    await logins(browser, path.join(dir, 'secured'))
    await atScale(browser, path.join(dir, 'scale'), problems)
    assert.deepStrictEqual(problems, [], `no script errors at scale: ${problems.join('; ')}`)
    await browser.close()
    browser = null
    s.proc.kill('SIGTERM')
    const code = await new Promise(resolve => s.proc.on('exit', resolve))
    assert.strictEqual(code, 0, `sluice serve exited ${code}`)
    console.log(`PASS: console_browser_test (screenshots in ${shots})`)
  } catch (e) {
    console.log(`FAIL: console_browser_test: ${e.stack || e}`)
    if (problems.length) console.log(problems.join('\n'))
    console.log(s.logs())
    process.exitCode = 1
  } finally {
    if (browser) await browser.close().catch(() => {})
    if (s.proc.exitCode === null) s.proc.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main()
