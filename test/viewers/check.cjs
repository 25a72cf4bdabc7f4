// Opens tracekit's exports and report in real viewers, in headless
// Chromium driven by puppeteer-core, and checks from the pages what they
// show:
//   - the Chrome export of the known workload in speedscope: one profile
//     (track) per process, named by pid and registered name, and the
//     workload's function frames in the sandwich view;
//   - the folded export in speedscope: the same frames, the processes as
//     root frames;
//   - the HTML report of the sample suite's failing case: one arrow per
//     message in the sequence diagram, labelled, one table row per event,
//     printed as the hook's text file prints it (short references);
//   - the report of a hand-made trace: replies whose sender was not traced
//     drawn from the server the call went to, no reply label on a request,
//     every label within its arrow's lifelines and on the page, and every
//     call of the timeline visible beside one long call.
//   - the latency drawings of calls of known durations, as an SVG export
//     and in a report: a drawing per function, its bars holding every
//     call that returned (blue) or raised (red), on a log scale whose
//     decades are evenly spaced, the bars within the measured minimum and
//     maximum, and the percentile marks where their values are.
// Usage: node check.cjs VIEWERS_DIR OUT_DIR SHOTS_DIR|-
// OUT_DIR holds workload.trace.json, workload.folded, report.html and the
// *.expect.json written by tracekit_viewers.erl. Exit status 0 when every
// check holds.
'use strict';
const path = require('path');
const fs = require('fs');

const [viewers, outDir, shotsDir] = process.argv.slice(2);
const puppeteer = require(path.join(viewers, 'node_modules', 'puppeteer-core'));
const speedscope = path.join(viewers, 'node_modules', 'speedscope', 'dist', 'release', 'index.html');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

let failures = 0;
let passes = 0;
function check(what, ok, detail) {
  if (ok) {
    passes++;
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}${detail === undefined ? '' : ': ' + detail}`);
  }
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
const readJson = f => JSON.parse(fs.readFileSync(path.join(outDir, f), 'utf8'));

async function shot(page, name, opts = {}) {
  if (shotsDir === '-') return;
  fs.mkdirSync(shotsDir, {recursive: true});
  await page.screenshot({path: path.join(shotsDir, name), ...opts});
}

// Loads a profile into speedscope as its command-line tool does: a
// script that hands the file's bytes to speedscope.loadFileFromBase64.
async function openInSpeedscope(page, file) {
  const name = path.basename(file);
  const loader = path.join(outDir, name + '.load.js');
  fs.writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(name)}, ` +
                   `${JSON.stringify(fs.readFileSync(file).toString('base64'))})`);
  await page.goto('file://' + speedscope + '#localProfilePath=' + loader);
  await page.waitForFunction(n => document.title === `${n} - speedscope`, {timeout: 30000}, name);
  // The toolbar names the profile once it is drawn: "NAME (i/N)", or
  // the file's name when it holds one profile.
  await page.waitForFunction(n => /\(\d+\/\d+\)/.test(document.body.innerText) ||
                                  document.body.innerText.includes('\n' + n + '\n'),
                             {timeout: 30000}, name);
}

// The toolbar's "NAME (i/N)".
async function profileTitle(page) {
  return page.evaluate(() => {
    const m = document.body.innerText.match(/\n?([^\n]*) \((\d+)\/(\d+)\)/);
    return m ? {name: m[1], index: +m[2], count: +m[3]} : null;
  });
}

async function sandwichSymbols(page) {
  await page.keyboard.press('3');
  await sleep(500);
  return page.evaluate(() => document.body.innerText.split('\n').map(s => s.trim()));
}

async function chromeExport(browser) {
  const expect = readJson('workload.expect.json');
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 800});
  await openInSpeedscope(page, path.join(outDir, 'workload.trace.json'));
  // Every profile: one per track (process, and its scheduling track).
  const first = await profileTitle(page);
  check('speedscope loaded the Chrome export', first !== null, 'no profile title');
  if (first === null) return page.close();
  const names = [first.name];
  for (let i = 1; i < first.count; i++) {
    await page.keyboard.press('n');
    await sleep(300);
    names.push((await profileTitle(page)).name);
  }
  for (let i = 1; i < first.count; i++) await page.keyboard.press('p');
  await sleep(300);
  for (const track of expect.tracks) {
    check(`speedscope shows a track for ${track}`,
          names.some(n => n.includes(track + ' (tid ')), JSON.stringify(names));
  }
  check('each track is grouped under its node',
        names.every(n => n.startsWith('nonode@nohost (pid 1), ')), JSON.stringify(names));
  // The server's calls are in its profile, the first one: the busiest
  // process, though the client's event comes first in the trace.
  check('the first profile is the busiest process, the server',
        first.name.includes(expect.tracks[0]), first.name);
  await page.keyboard.press('1');
  await sleep(500);
  await shot(page, 'speedscope-chrome.png');
  const symbols = await sandwichSymbols(page);
  for (const f of expect.frames) {
    check(`speedscope (Chrome export) has frame ${f}`, symbols.includes(f));
  }
  await page.close();
}

async function foldedExport(browser) {
  const expect = readJson('workload.expect.json');
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 800});
  await openInSpeedscope(page, path.join(outDir, 'workload.folded'));
  await page.keyboard.press('2');
  await sleep(500);
  await shot(page, 'speedscope-folded.png');
  const symbols = await sandwichSymbols(page);
  for (const f of expect.frames) {
    check(`speedscope (folded export) has frame ${f}`, symbols.includes(f));
  }
  check(`speedscope (folded export) has the server as a root frame`,
        symbols.includes(expect.tracks[0]), expect.tracks[0]);
  await page.close();
}

async function report(browser) {
  const expect = readJson('report.expect.json');
  const page = await browser.newPage();
  await page.setViewport({width: 1300, height: 900});
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  page.on('requestfailed', r => errors.push('request ' + r.url()));
  const requests = [];
  page.on('request', r => requests.push(r.url()));
  await page.goto('file://' + path.join(outDir, 'report.html'), {waitUntil: 'load'});
  const seen = await page.evaluate(() => {
    const rows = [...document.querySelectorAll('svg.sequence g.row')];
    return {
      arrows: rows.map(g => g.querySelector(':scope > text').textContent),
      lines: rows.map(g => g.querySelectorAll(':scope > line.msg, :scope > path.msg').length),
      lost: document.querySelectorAll('svg.sequence .lost').length,
      hovers: rows.map(g => g.querySelector(':scope > title').textContent),
      tableRows: document.querySelectorAll('#event-table tbody tr').length,
      tableText: [...document.querySelectorAll('#event-table tbody td.e')].map(td => td.textContent),
      svgs: document.querySelectorAll('svg').length,
      // The arrows are drawn: each has a box on the page.
      drawn: rows.filter(g => { const b = g.getBBox(); return b.width > 20 && b.height > 0; }).length,
    };
  });
  check('the report has one arrow per message, labelled',
        JSON.stringify(seen.arrows) === JSON.stringify(expect.arrows), JSON.stringify(seen.arrows));
  check('each arrow is one line', seen.lines.every(n => n === 1), JSON.stringify(seen.lines));
  check('each arrow is drawn', seen.drawn === expect.arrows.length, seen.drawn);
  check('no arrow is lost', seen.lost === 0, seen.lost);
  check('each arrow shows its seq_trace serial on hover',
        seen.hovers.every(h => /serial \[\d+,\d+\]/.test(h)), JSON.stringify(seen.hovers));
  check(`the event table has ${expect.rows} rows`, seen.tableRows === expect.rows, seen.tableRows);
  check('the event table prints references as the text file does (short tags)',
        seen.tableText.some(t => t.includes('#Ref<..')) &&
        !seen.tableText.some(t => t.includes('#Ref<0.')), JSON.stringify(seen.tableText));
  check('the report has its two drawings (diagram, timeline)', seen.svgs === 2, seen.svgs);
  check('the report loads nothing and raises nothing',
        errors.length === 0 && requests.every(u => u.startsWith('file://') || u.startsWith('data:')),
        JSON.stringify({errors, requests}));
  await shot(page, 'report.png', {fullPage: true});
  await page.close();
}

// What the latency drawings of a page show, read from the SVG elements.
async function latencyDrawings(page) {
  return page.evaluate(() => [...document.querySelectorAll('svg.latency')].map(svg => {
    const ticks = [...svg.querySelectorAll('text.tick')].map(t => ({
      us: +t.getAttribute('data-us'), x: +t.getAttribute('x')}));
    const rects = cls => [...svg.querySelectorAll('rect.' + cls)].map(r => {
      const b = r.getBBox();
      return {n: +r.getAttribute('data-n'), x0: b.x, x1: b.x + b.width, h: b.height};
    });
    const marks = [...svg.querySelectorAll('line.mark')].map(l => ({
      p: l.getAttribute('data-p'), us: +l.getAttribute('data-us'), x: +l.getAttribute('x1')}));
    const box = svg.getBoundingClientRect();
    return {mfa: svg.getAttribute('data-mfa'), ticks, bars: rects('bar'), excs: rects('exc'),
            marks, width: box.width, height: box.height};
  }));
}

function checkLatency(where, drawings, expect) {
  check(`${where}: a drawing per function, by total time`,
        JSON.stringify(drawings.map(d => d.mfa)) === JSON.stringify(expect.functions.map(f => f.mfa)),
        JSON.stringify(drawings.map(d => d.mfa)));
  for (const [i, d] of drawings.entries()) {
    const f = expect.functions[i];
    if (!f) break;
    const sum = rs => rs.reduce((a, r) => a + r.n, 0);
    check(`${where}: ${d.mfa} is drawn`, d.width > 300 && d.height > 100, `${d.width}x${d.height}`);
    check(`${where}: ${d.mfa}'s bars hold its ${f.returned} returns and ${f.raised} exceptions`,
          sum(d.bars) === f.returned && sum(d.excs) === f.raised,
          `${sum(d.bars)}, ${sum(d.excs)}`);
    check(`${where}: ${d.mfa}'s bars have heights`,
          d.bars.every(b => b.h > 0) && d.excs.every(b => b.h > 0));
    // Decades evenly spaced: a log scale.
    const steps = d.ticks.slice(1).map((t, k) => [t.x - d.ticks[k].x, t.us / d.ticks[k].us]);
    check(`${where}: ${d.mfa}'s axis is in decades, evenly spaced`,
          d.ticks.length >= 2 && steps.every(([dx, r]) => Math.abs(dx - steps[0][0]) < 0.05 &&
                                                           Math.abs(r - 10) < 1e-6),
          JSON.stringify(d.ticks));
    const x = us => d.ticks[0].x + (Math.log10(us) - Math.log10(d.ticks[0].us)) * steps[0][0];
    const all = d.bars.concat(d.excs);
    check(`${where}: ${d.mfa}'s bars lie between its minimum and maximum`,
          all.every(b => b.x1 >= x(f.min_us) - 0.5 && b.x0 <= x(f.max_us) + 0.5) &&
          all.some(b => b.x0 <= x(f.max_us) + 0.5 && b.x1 >= x(f.max_us) - 0.5),
          JSON.stringify({min: x(f.min_us), max: x(f.max_us), bars: all.map(b => [b.x0, b.x1])}));
    check(`${where}: ${d.mfa}'s marks are where their values are`,
          d.marks.length === (f.returned > 0 ? 4 : 0) &&
          d.marks.every(m => Math.abs(m.x - x(m.us)) < 0.6) &&
          d.marks.some(m => m.p === 'p50' && Math.abs(m.us - f.p50_us) < 0.01),
          JSON.stringify(d.marks));
  }
}

async function latency(browser) {
  const expect = readJson('latency.expect.json');
  for (const [file, shotName] of [['latency.svg', 'latency.png'],
                                  ['latency-report.html', 'latency-report.png']]) {
    const page = await browser.newPage();
    await page.setViewport({width: 900, height: 700});
    const errors = [];
    const requests = [];
    page.on('pageerror', e => errors.push(e.message));
    page.on('request', r => requests.push(r.url()));
    await page.goto('file://' + path.join(outDir, file), {waitUntil: 'load'});
    checkLatency(file, await latencyDrawings(page), expect);
    if (file.endsWith('.html')) {
      const rows = await page.evaluate(() =>
        [...document.querySelectorAll('table.latency tbody tr')].map(r => r.cells[0].textContent));
      check(`${file}: the Latency table has a row per function`,
            JSON.stringify(rows) === JSON.stringify(expect.functions.map(f => f.mfa)),
            JSON.stringify(rows));
    }
    check(`${file}: loads nothing and raises nothing`,
          errors.length === 0 && requests.every(u => u.startsWith('file://') || u.startsWith('data:')),
          JSON.stringify({errors, requests}));
    await shot(page, shotName, {fullPage: true});
    await page.close();
  }
}

async function drawing(browser) {
  const expect = readJson('drawing.expect.json');
  const page = await browser.newPage();
  await page.setViewport({width: 1300, height: 900});
  await page.goto('file://' + path.join(outDir, 'drawing.html'), {waitUntil: 'load'});
  const seen = await page.evaluate(() => {
    const lifelines = [...document.querySelectorAll('svg.sequence line.lifeline')]
      .map(l => +l.getAttribute('x1'));
    const col = lifelines.length > 1 ? lifelines[1] - lifelines[0] : 0;
    const rows = [...document.querySelectorAll('svg.sequence g.row')].map(g => {
      const text = g.querySelector(':scope > text');
      const line = g.querySelector(':scope > line.msg');
      const loop = g.querySelector(':scope > path.msg');
      const b = text.getBBox();
      let lo, hi, x1 = null, x2 = null;
      if (line) {
        x1 = +line.getAttribute('x1');
        x2 = +line.getAttribute('x2');
        lo = Math.min(x1, x2) - 2;
        hi = Math.max(x1, x2) + 2;
      } else {
        lo = +text.getAttribute('x') - 36;
        hi = lo + col;
      }
      return {label: text.textContent, x1, x2, left: b.x, right: b.x + b.width, lo, hi};
    });
    const heads = [...document.querySelectorAll('svg.sequence g.head text')].map(t => t.textContent);
    const calls = [...document.querySelectorAll('svg.timeline rect.call')]
      .map(r => r.getBoundingClientRect().width);
    return {rows, heads, calls};
  });
  check('the drawing report labels calls and replies',
        JSON.stringify(seen.rows.slice(0, 4).map(r => r.label)) === JSON.stringify(expect.arrows),
        JSON.stringify(seen.rows.map(r => r.label)));
  check('a request tagged with a reference has no reply label',
        seen.rows[expect.request] && !seen.rows[expect.request].label.startsWith('reply'),
        seen.rows[expect.request] && seen.rows[expect.request].label);
  check('replies come from the server the call went to, not from (untraced)',
        expect.replies.every(([r, c]) => Math.abs(seen.rows[r].x1 - seen.rows[c].x2) <= 2) &&
        !seen.heads.some(h => h.includes('untraced')), JSON.stringify(seen.heads));
  const out = seen.rows.filter(r => r.left < r.lo || r.right > r.hi || r.left < 0);
  check('every label stays between its lifelines and on the page', out.length === 0,
        JSON.stringify(out));
  check(`the timeline draws the ${expect.calls} calls, each visible (4 px or more)`,
        seen.calls.length === expect.calls && seen.calls.every(w => w >= 4),
        JSON.stringify(seen.calls));
  await shot(page, 'report-drawing.png', {fullPage: true});
  await page.close();
}

// The page of a slow call (tracekit:slow/2): a bar per call of the
// process, each inside the one it was called from (return_to nesting), the
// outermost spanning the call, and its messages as arrows.
async function slow(browser) {
  const expect = readJson('slow.expect.json');
  const page = await browser.newPage();
  await page.setViewport({width: 1300, height: 900});
  await page.goto('file://' + path.join(outDir, 'slow.html'), {waitUntil: 'load'});
  const seen = await page.evaluate(() => {
    const bars = [...document.querySelectorAll('svg.timeline rect.call')].map(r => {
      const b = r.getBoundingClientRect();
      const t = r.parentNode.querySelector('title');
      return {x: b.x, right: b.x + b.width, y: b.y, title: t ? t.textContent : ''};
    });
    const text = [...document.querySelectorAll('svg.timeline text')].map(t => t.textContent);
    const arrows = document.querySelectorAll('svg.sequence g.row').length;
    return {bars, text, arrows};
  });
  check(`the slow call's page draws its ${expect.calls} calls`,
        seen.bars.length === expect.calls, seen.bars.length);
  const outer = seen.bars[0];
  const outside = seen.bars.filter(b => b.x < outer.x - 1 || b.right > outer.right + 1 || b.y < outer.y);
  check('every call lies within the outermost, beneath it', outer && outside.length === 0,
        JSON.stringify(outside));
  check('the calls of the story are named on their bars',
        expect.labels.every(l => seen.text.some(t => t.includes(l))), JSON.stringify(seen.text));
  check(`the request, its reply and the sleep's end are ${expect.arrows} arrows`,
        seen.arrows === expect.arrows,
        seen.arrows);
  await shot(page, 'slow.png', {fullPage: true});
  await page.close();
}

(async () => {
  const started = Date.now();
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--allow-file-access-from-files',
           '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-dev-shm-usage'],
  });
  try {
    await chromeExport(browser);
    await foldedExport(browser);
    await report(browser);
    await latency(browser);
    await drawing(browser);
    await slow(browser);
  } catch (e) {
    check('the viewers ran', false, e && e.stack);
  } finally {
    await browser.close();
  }
  console.log(`${((Date.now() - started) / 1000).toFixed(1)} s in Chromium`);
  console.log(`viewers: ${passes} passed, ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
})();
