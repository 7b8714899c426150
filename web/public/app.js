// The little the pages do in the browser: ask before destructive actions,
// and redraw the throughput chart as new samples come in.
'use strict';
document.addEventListener('submit', (event) => {
  const form = event.target;
  const question = form.getAttribute('data-confirm');
  if (question && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  for (const b of form.querySelectorAll('button[type=submit]')) b.disabled = true;
});

for (const img of document.querySelectorAll('img.chart[data-refresh]')) {
  const seconds = Number(img.getAttribute('data-refresh')) || 10;
  const base = img.getAttribute('src');
  setInterval(() => {
    if (document.hidden) return;
    img.src = `${base}${base.includes('?') ? '&' : '?'}t=${Date.now()}`;
  }, seconds * 1000);
}
