/* The live status page: fetch the page again every few seconds and swap in the new figures, leaving the
   focus and the scroll position alone (a <meta refresh> reloaded the whole page under the reader). A
   button pauses it (WCAG 2.2.2); without JavaScript the page has a "Refresh now" link. */
(function () {
  "use strict";
  var line = document.querySelector("[data-refresh]");
  var region = document.querySelector("[data-refresh-region]");
  if (!line || !region || !window.fetch || !window.DOMParser) { return; }
  var seconds = parseInt(line.getAttribute("data-refresh-seconds"), 10) || 10;
  var toggle = line.querySelector("[data-refresh-toggle]");
  var stamp = line.querySelector("[data-refreshed-at]");
  var running = true;
  var timer = null;

  function refresh() {
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var figures = fresh.querySelector("[data-refresh-region]");
        var state = fresh.getElementById("study-state");
        if (figures) { region.innerHTML = figures.innerHTML; }
        if (state && document.getElementById("study-state")) {
          document.getElementById("study-state").textContent = state.textContent;
        }
        stamp.textContent = new Date().toLocaleTimeString();
      })
      .catch(function () { /* the next round tries again */ })
      .then(schedule);
  }

  function schedule() {
    window.clearTimeout(timer);
    if (running) { timer = window.setTimeout(refresh, seconds * 1000); }
  }

  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    running = !running;
    toggle.textContent = running ? "Pause automatic refresh" : "Resume automatic refresh";
    schedule();
  });
  schedule();
})();
