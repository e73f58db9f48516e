// Runs inside the sandbox: node scrape.js URL SCREENSHOT.png
// Opens URL in headless Chromium, prints what it scraped as one line of
// JSON and saves a full-page screenshot. playwright-core is installed
// globally in the opensandbox/playwright image and found through
// NODE_PATH; CHROMIUM_PATH names Debian's Chromium.
const { chromium } = require('playwright-core');

async function main() {
  const [url, out] = process.argv.slice(2);
  if (!url || !out) throw new Error('usage: node scrape.js URL SCREENSHOT.png');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    // Chromium's own sandbox cannot start inside a container; the
    // container is the sandbox. /dev/shm is small in containers.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
    const resp = await page.goto(url, { waitUntil: 'load' });
    if (!resp || !resp.ok()) throw new Error(`GET ${url}: ${resp ? resp.status() : 'no response'}`);
    const result = {
      title: await page.title(),
      heading: (await page.textContent('h1')).trim(),
      tagline: (await page.textContent('#tagline')).trim(),
      items: await page.$$eval('li', (els) => els.map((e) => e.textContent.trim())),
      chromium: browser.version(),
      playwright: require('playwright-core/package.json').version,
    };
    await page.screenshot({ path: out, fullPage: true });
    console.log(JSON.stringify(result));
  } finally {
    await browser.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
